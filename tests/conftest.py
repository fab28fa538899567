import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
os.environ.setdefault("MPLBACKEND", "Agg")  # notebooks draw figures; no screen in CI
# The project names no folder outside itself (settings.ini leaves gpt2_dir and shared_data_dir empty); the tests
# reach ../shared, where it exists, through the environment, which the chapters executed in this process and the
# commands the tests start inherit. Tests that need it skip where it is absent.
for _key, _sub in (("COUPLED_QK_GPT2_DIR", "gpt2"), ("COUPLED_QK_SHARED_DATA_DIR", "data")):
    if (SHARED / _sub).is_dir():
        os.environ.setdefault(_key, str(SHARED / _sub))

_EXIT = {}


def pytest_sessionfinish(session, exitstatus):
    _EXIT["status"] = int(exitstatus)


def pytest_unconfigure(config):
    """After pytest's counted line, end at once when torch.compile ran in this process (the HF chapter compiles a
    model): dynamo's weak references otherwise print harmless KeyErrors while the interpreter shuts down, after
    the line CI reads. Every test has run and every report is written by now; the exit status is pytest's."""
    import sys
    if "torch._dynamo" in sys.modules and "status" in _EXIT:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_EXIT["status"])
