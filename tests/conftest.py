import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
os.environ.setdefault("MPLBACKEND", "Agg")  # notebooks draw figures; no screen in CI
