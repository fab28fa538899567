"""Reproducibility as measured (issue 36, item 9): retrain committed runs with another torch thread count and state
how far their numbers move.

    .venv/bin/python scripts/thread_check.py --scale cpu --threads 2

retrains the main table's first-seed standard and Hamiltonian runs (the primary pair) in a temporary folder, each in
its own process with `--threads` torch threads, and compares their validation and test perplexity with the
committed summaries in figures/<scale>/runs/ (whose `hardware` field names the thread count they were made with).
It writes figures/<scale>/reproducibility/threads.csv and .md. A thread count changes the order of floating-point
reductions, so the numbers may move in the last digits; the README quotes what this measures.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def the_pair(scale: str) -> list:
    from coupled_qk.registry import artifact_runs
    from coupled_qk.scales import scale_spec
    seed = scale_spec(scale).seeds[0]
    runs = [r for r in artifact_runs("main_table", scale) if r.config["seed"] == seed and not r.tags.get("control")
            and r.config["variant"] in ("standard", "hamiltonian")]
    return sorted(runs, key=lambda r: r.config["variant"], reverse=True)


def train_one(scale: str, run_id: str, out: str, threads: int) -> None:
    "In a fresh process whose thread count is set before torch starts: train one registry run into `out`."
    import torch
    torch.set_num_threads(threads)
    from coupled_qk.calls import trainer, typed_config
    run = next(r for r in the_pair(scale) if r.run_id == run_id)
    trainer(run.kind)(typed_config(run, Path(out), device="cpu"), Path(out), quiet=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", default="cpu")
    ap.add_argument("--threads", type=int, default=2, help="torch threads for the retrained runs (default 2)")
    ap.add_argument("--one", nargs=2, metavar=("RUN_ID", "OUT"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        train_one(a.scale, a.one[0], a.one[1], a.threads)
        return 0
    import pandas as pd
    summaries = ROOT / "figures" / a.scale / "runs"
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for run in the_pair(a.scale):
            committed = summaries / f"{run.run_id}.json"
            if not committed.is_file():
                print(f"thread_check: no committed summary {committed}; "
                      f"run `coupled-qk reproduce main_table --scale {a.scale}` first")
                return 1
            old = json.loads(committed.read_text())["result"]
            out = Path(tmp) / run.run_id
            env = dict(os.environ, OMP_NUM_THREADS=str(a.threads), MKL_NUM_THREADS=str(a.threads))
            subprocess.run([sys.executable, __file__, "--scale", a.scale, "--threads", str(a.threads),
                            "--one", run.run_id, str(out)], check=True, env=env, cwd=ROOT)
            new = json.loads((out / "result.json").read_text())
            for k in ("val_ppl", "test_ppl"):
                rows.append(dict(run_id=run.run_id, variant=run.config["variant"], seed=run.config["seed"], metric=k,
                                 committed=old[k], committed_hardware=old.get("hardware"), retrained=new[k],
                                 retrained_hardware=new.get("hardware"), rel_diff=abs(new[k] / old[k] - 1)))
    df = pd.DataFrame(rows)
    d = ROOT / "figures" / a.scale / "reproducibility"
    d.mkdir(parents=True, exist_ok=True)
    df.to_csv(d / "threads.csv", index=False)
    (d / "threads.md").write_text(f"Retrained with {a.threads} torch threads against the committed summaries "
                                  f"(scale {a.scale}); rel_diff = |retrained / committed - 1|\n\n"
                                  + df.to_markdown(index=False, floatfmt=".8g") + "\n")
    print(df.to_string(index=False))
    print(f"largest relative difference: {df.rel_diff.max():.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
