"""Project hygiene: the package is the notebooks' export, the notebooks are clean, and CI runs the README's test
command. (That pyproject.toml, the locks and environment.yml agree: tests/test_environment.py.)"""
import ast
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

BIN = Path(sys.executable).parent


def _copy_project(dst: Path):
    for name in ("pyproject.toml", "settings.ini", "README.md"):
        if (ROOT / name).exists(): shutil.copy(ROOT / name, dst / name)
    shutil.copytree(ROOT / "nbs", dst / "nbs", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    shutil.copytree(ROOT / "coupled_qk", dst / "coupled_qk", ignore=shutil.ignore_patterns("__pycache__"))


def _tree(d: Path, pattern: str):
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob(pattern))
            if ".ipynb_checkpoints" not in p.parts and "__pycache__" not in p.parts}


def test_export_in_sync(tmp_path):
    _copy_project(tmp_path)
    for p in (tmp_path / "coupled_qk").glob("*.py"):
        if p.name != "__init__.py": p.unlink()  # export must recreate every module
    subprocess.run([BIN / "nbdev-export"], cwd=tmp_path, check=True, capture_output=True)
    subprocess.run([sys.executable, ROOT / "scripts/wrap_all.py", "coupled_qk"], cwd=tmp_path, check=True)
    fresh, committed = _tree(tmp_path / "coupled_qk", "*.py"), _tree(ROOT / "coupled_qk", "*.py")
    stale = sorted(k for k in set(fresh) | set(committed) if fresh.get(k) != committed.get(k))
    assert not stale, f"coupled_qk/ is out of sync with nbs/ in {stale}: run `make export` and commit"


def test_notebooks_clean(tmp_path):
    _copy_project(tmp_path)
    subprocess.run([BIN / "nbdev-clean"], cwd=tmp_path, check=True, capture_output=True)
    cleaned, committed = _tree(tmp_path / "nbs", "*.ipynb"), _tree(ROOT / "nbs", "*.ipynb")
    dirty = sorted(k for k in committed if cleaned.get(k) != committed[k])
    assert not dirty, f"notebooks not clean: {dirty}: run `make clean-nbs` and commit"


def test_ci_runs_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```(?:bash|sh)?\n(.*?)```", readme, re.S)
    cmds = [l.split("#")[0].strip() for b in blocks for l in b.splitlines() if l.split("#")[0].strip()]
    assert cmds[:2] == ["make reproduce", "make test"], f"README's first two commands are {cmds[:2]}"
    ci = [l.strip() for l in (ROOT / ".ci/run").read_text().splitlines() if l.strip() and not l.startswith("#")]
    assert ci[-1] == "make test", ".ci/run must end by running the README's test command"


def test_ruff_clean():
    """The exported package and scripts/ pass the project's ruff rules (pyproject.toml [tool.ruff]), lines of 120 at most
    included: fix them in the notebooks."""
    r = subprocess.run([BIN / "ruff", "check", "--output-format", "concise", "coupled_qk", "scripts"], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-1000:]


MODULE_LINES, FUNCTION_LINES = 450, 60         # the rooms: past these, a module or function is split by responsibility


def oversized(path: Path) -> list[str]:
    "What in `path` is over the rooms' limits: the module's line count, then each function's."
    src = path.read_text(encoding="utf-8")
    out = [f"{path.name}: {n} lines"] if (n := len(src.splitlines())) > MODULE_LINES else []
    funcs = [f for f in ast.walk(ast.parse(src)) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return out + [f"{path.name}:{f.lineno} {f.name}: {f.end_lineno - f.lineno + 1} lines" for f in funcs
                  if f.end_lineno - f.lineno + 1 > FUNCTION_LINES]


def test_modules_and_functions_fit_their_rooms(tmp_path):
    """Every exported module and script is at most 450 lines and every function in them at most 60: split in the
    notebooks, by responsibility (a new module is a chapter of its own)."""
    files = [p for p in sorted((ROOT / "coupled_qk").glob("*.py")) + sorted((ROOT / "scripts").glob("*.py"))
             if p.name != "_modidx.py"]
    assert len(files) > 10 and not [x for p in files for x in oversized(p)], [x for p in files for x in oversized(p)]
    big = tmp_path / "big.py"                      # the check can fail: a 61-line function in a 461-line module
    big.write_text("def f():\n" + "    x = 1\n" * 60 + "\n" * 400)
    assert len(oversized(big)) == 2, oversized(big)


def test_index_is_the_readme():
    """The docs' front page and the README are one text (`make index` writes nbs/index.ipynb from README.md), so
    neither nbdev-readme nor an edit to one of them can leave the other behind."""
    cells = json.loads((ROOT / "nbs" / "index.ipynb").read_text())["cells"]
    assert [c["cell_type"] for c in cells] == ["markdown"], "nbs/index.ipynb: one markdown cell; run `make index`"
    assert "".join(cells[0]["source"]) == (ROOT / "README.md").read_text().rstrip(), \
        "nbs/index.ipynb differs from README.md: run `make index` and commit"


def test_gpu_check_without_cuda_is_one_line():
    "scripts/gpu_check.sh never depends on a GPU: without CUDA it says so in one line and exits 0."
    import torch
    if torch.cuda.is_available():
        import pytest
        pytest.skip("CUDA is present here: the script would run its checks")
    r = subprocess.run(["bash", ROOT / "scripts" / "gpu_check.sh"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert len((r.stdout + r.stderr).strip().splitlines()) == 1, r.stdout + r.stderr


def test_smoke_figures_stay_out_of_the_tree():
    "A smoke run's figures are ignored by git, its run summaries are not; the default scale's figures and summaries are not."
    if not (ROOT / ".git").exists():
        import pytest
        pytest.skip("not a git checkout")
    ignored = lambda p: subprocess.run(["git", "check-ignore", "-q", p], cwd=ROOT).returncode == 0
    assert ignored("figures/smoke/main_table/main_table.png") and not ignored("figures/smoke/runs/lm-0.json")
    assert not ignored("figures/cpu/main_table/main_table.png") and not ignored("figures/cpu/runs/lm-0.json")


def test_grouped_files_run_on_one_worker(tmp_path):
    "Under `make test`'s `--dist loadgroup`, every test of a conftest.ONE_WORKER file runs on one worker, the rest on both."
    (tmp_path / "tests").mkdir()
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    shutil.copy(ROOT / "tests" / "conftest.py", tmp_path / "tests")
    body = ("import os, pytest\n@pytest.mark.parametrize('i', range(6))\ndef test_it(i, tmp_path_factory):\n"
            "    open(os.path.join({out!r}, f'{name}-{{i}}'), 'w').write(os.environ['PYTEST_XDIST_WORKER'])\n")
    for name in ("test_slurm", "test_other"):
        (tmp_path / "tests" / f"{name}.py").write_text(body.format(out=str(tmp_path), name=name))
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider",
                        "tests"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    workers = {name: {f.read_text() for f in tmp_path.glob(f"{name}-*")} for name in ("test_slurm", "test_other")}
    assert len(workers["test_slurm"]) == 1 and workers["test_slurm"] | workers["test_other"] == {"gw0", "gw1"}, workers
