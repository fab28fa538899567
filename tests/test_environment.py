"""The pinned environment: pyproject.toml, the two locks and environment.yml say the same thing, and the
environment `make setup` made here is exactly the lock (`pip freeze` equals it, for the CPU variant)."""
import subprocess
import sys
import tomllib

import pytest
from conftest import ROOT
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from coupled_qk.provenance import CUDA_ONLY, environment_yml, lock_path, lock_variant, locked_versions

CPU, CUDA = lock_path("cpu", ROOT), lock_path("cuda", ROOT)


def _requirements():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = [r for reqs in project.get("optional-dependencies", {}).values() for r in reqs]
    return [Requirement(r) for r in project["dependencies"] + extras]


@pytest.mark.parametrize("lock", [CPU, CUDA], ids=["cpu", "cuda"])
def test_lock_satisfies_pyproject(lock):
    "Every dependency of pyproject.toml, and of its extras, is pinned in the lock at a version its range allows."
    pins = locked_versions(lock)
    missing = [str(r) for r in _requirements() if canonicalize_name(r.name) not in pins]
    assert not missing, f"{lock.name} lacks {missing}: run `make lock`"
    outside = [f"{r} (locked {pins[canonicalize_name(r.name)]})" for r in _requirements()
               if not r.specifier.contains(pins[canonicalize_name(r.name)], prereleases=True)]
    assert not outside, f"{lock.name} pins outside pyproject.toml's ranges: {outside}: run `make lock`"


def test_cuda_lock_is_the_cpu_lock():
    """One environment in two builds: the same pins, except torch's local label (+cpu) and the CUDA runtime
    that only torch's CUDA build needs."""
    cpu, cuda = locked_versions(CPU), locked_versions(CUDA)
    assert cpu["torch"].endswith("+cpu") and cuda["torch"] == cpu["torch"].removesuffix("+cpu")
    shared = lambda pins: {n: v for n, v in pins.items() if n != "torch" and not n.startswith(CUDA_ONLY)}
    assert shared(cpu) == shared(cuda), "requirements/cpu.lock and cuda.lock pin different versions: run `make lock`"
    assert not any(n.startswith(CUDA_ONLY) for n in cpu), "the CPU lock holds CUDA packages"


def test_environment_yml_is_the_lock():
    assert (ROOT / "environment.yml").read_text() == environment_yml(CPU), \
        "environment.yml is not what `make lock` writes from requirements/cpu.lock: run `make lock`"


def test_pip_freeze_is_the_lock():
    """What `make setup` installed here is exactly the lock: `pip freeze` (all but pip itself and the editable
    coupled_qk) lists the lock's pins and nothing else."""
    if lock_variant() != "cpu":
        pytest.skip("the CUDA lock's environment is checked on a CUDA machine's own setup")
    out = subprocess.run([sys.executable, "-m", "pip", "freeze", "--all", "--exclude-editable"], check=True,
                         capture_output=True, text=True).stdout
    frozen = dict(l.split("==", 1) for l in out.splitlines() if "==" in l)
    frozen = {canonicalize_name(n): v for n, v in frozen.items() if canonicalize_name(n) != "pip"}
    locked = locked_versions(CPU)
    diff = sorted(f"{n}: installed {frozen.get(n, 'missing')}, locked {locked.get(n, 'not locked')}"
                  for n in set(frozen) | set(locked) if frozen.get(n) != locked.get(n))
    assert not diff, f"the environment is not the lock ({diff}): `rm -rf .venv && make setup` rebuilds it"
