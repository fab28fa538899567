import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
os.environ.setdefault("MPLBACKEND", "Agg")  # notebooks draw figures; no screen in CI
# The project names no folder outside itself (settings.ini leaves gpt2_dir and shared_data_dir empty); the tests
# reach ../shared, where it exists, through the environment, which the chapters executed in this process and the
# commands the tests start inherit. Tests that need it skip where it is absent.
for _key, _sub in (("COUPLED_QK_GPT2_DIR", "gpt2"), ("COUPLED_QK_SHARED_DATA_DIR", "data")):
    if (SHARED / _sub).is_dir():
        os.environ.setdefault(_key, str(SHARED / _sub))

# `make test` runs two pytest-xdist workers on the two cores: one thread each (set before any test imports torch)
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")

# Tests that share one resource run on one worker: test_docs.py's tests read one build of the site, and
# test_slurm.py's tests share one cluster. pytest-xdist's own `xdist_group` mark renames a test's node id, which
# pytest 9 no longer reads (the mark was silently ignored: the site built twice and two clusters ran side by side),
# so `--dist loadgroup` groups these files here, through xdist's scheduler hook.
ONE_WORKER = ("tests/test_docs.py", "tests/test_slurm.py")


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FileGroups(LoadScopeScheduling):
        "xdist's load-by-scope scheduling, where a scope is a file of ONE_WORKER or else a single test."
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return path if path in ONE_WORKER else nodeid
    return FileGroups(config, log)


_EXIT = {}


def pytest_sessionfinish(session, exitstatus):
    _EXIT["status"] = int(exitstatus)


def pytest_unconfigure(config):
    """After pytest's counted line, end at once when torch.compile ran in this process (the HF chapter compiles a
    model): dynamo's weak references otherwise print harmless KeyErrors while the interpreter shuts down, after
    the line CI reads. Every test has run and every report is written by now; the exit status is pytest's."""
    import sys
    if os.environ.get("PYTEST_XDIST_WORKER"):     # a worker ends as xdist asks; its stderr is not shown anyway
        return
    if "torch._dynamo" in sys.modules and "status" in _EXIT:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_EXIT["status"])


def one_line_refusal(main, argv) -> str:
    "Run `coupled-qk ARGV` in this process: it must refuse with exit status 2 and one line on stderr, no traceback."
    import contextlib, io
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = main(argv)
    lines = err.getvalue().strip().splitlines()
    assert rc == 2, (rc, err.getvalue())
    assert len(lines) == 1 and "Traceback" not in err.getvalue(), err.getvalue()
    return lines[0]


def data_parallel_equals_one_process(pool, tmp_path, timeout: float) -> None:
    """One run trained by one task at batch 8, and by two tasks at batch 4 each (data-parallel, gloo on CPU), logs
    the same curve. `pool(folder, tasks)` is the executor's pool for jobs of that many tasks."""
    import json, time
    from coupled_qk.calls import RunCall
    from coupled_qk.train import TrainConfig
    base = dict(preset="smoke", variant="hamiltonian", corpus="pydocs", max_steps=12, eval_every=6, log_every=1,
                ckpt_every=6, eval_batches=2, device="cpu")
    def call(name, batch_size, out):
        return RunCall("lm", f"lm-{name}", TrainConfig(**base, batch_size=batch_size), str(tmp_path / out))
    h1 = pool(tmp_path / "one", 1).submit(call("one", 8, "r1"), "one")
    h2 = pool(tmp_path / "two", 2).submit(call("two", 4, "r2"), "two")
    t = time.time()
    while not (h1.done() and h2.done()) and time.time() - t < timeout:
        time.sleep(0.5)
    assert h1.result()["ran"] and h2.result()["ran"]
    r2 = json.loads((tmp_path / "r2" / "result.json").read_text())
    assert r2["world_size"] == 2 and r2["global_batch_tokens"] == 8 * 64
    c1, c2 = ([(m["step"], m["train_loss"], m["val_loss"]) for m in map(json.loads, (tmp_path / r / "metrics.jsonl")
               .read_text().splitlines())] for r in ("r1", "r2"))
    assert [s for s, *_ in c1] == [s for s, *_ in c2]
    for (_, a, va), (_, b, vb) in zip(c1, c2):
        assert (a is None and b is None) or abs(a - b) < 1e-4, (a, b)
        assert (va is None and vb is None) or abs(va - vb) < 1e-4, (va, vb)
