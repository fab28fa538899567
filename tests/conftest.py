import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
os.environ.setdefault("MPLBACKEND", "Agg")  # notebooks draw figures; no screen in CI

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
