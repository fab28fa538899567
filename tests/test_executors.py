"""The executors at smoke scale: submitit's local executor (the Slurm path on this machine) gives the results the
local worker pool gives; a run killed by its timeout is requeued and resumes bit-exactly; a failed job is one line."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, data_parallel_equals_one_process

CLI = [str(Path(sys.executable).with_name("coupled-qk"))]


def _ppl(figs: Path) -> dict:
    return {p.stem: (json.loads(p.read_text())["result"]["val_ppl"], json.loads(p.read_text())["result"]["test_ppl"])
            for p in (figs / "smoke" / "runs").glob("*.json")}


def test_submitit_local_equals_local(tmp_path):
    "`reproduce steps --executor submitit-local` exits 0 with the perplexities of `--executor local`."
    got = {}
    for ex in ("local", "submitit-local"):
        env = dict(os.environ, OMP_NUM_THREADS="1", COUPLED_QK_RUNS_DIR=str(tmp_path / ex / "runs"),
                   COUPLED_QK_FIGURES_DIR=str(tmp_path / ex / "figures"))
        p = subprocess.run([*CLI, "reproduce", "steps", "--scale", "smoke", "--jobs", "2", "--executor", ex],
                           env=env, cwd=ROOT, capture_output=True, text=True, timeout=900)
        assert p.returncode == 0, p.stderr[-2000:]
        assert "overhead " in p.stdout and "s/run (median)" in p.stdout, p.stdout[-1000:]
        assert p.stdout.count("] done lm ") == len(list((tmp_path / ex / "runs" / "lm").iterdir())), p.stdout
        got[ex] = _ppl(tmp_path / ex / "figures")
    assert got["local"] and got["local"] == got["submitit-local"]


def _metrics(d: Path) -> list:
    return [{k: v for k, v in json.loads(line).items() if k not in ("elapsed", "tokens_per_s")}
            for line in (d / "metrics.jsonl").read_text().splitlines()]


def test_interrupted_job_is_requeued_and_resumes_exactly(tmp_path, monkeypatch):
    """A submitit-local job that gets the signal of a job's time limit mid-run (USR2, which submitit's local
    controller, like Slurm, sends to the job's tasks shortly before the limit; sent here as soon as the run has a
    checkpoint, so that the test does not depend on the machine's speed) is requeued through the checkpoint
    protocol and resumes from the run's checkpoint: the same metrics as the same run never interrupted."""
    import signal
    import time
    from coupled_qk.executors import SubmititPool
    from coupled_qk.calls import RunCall
    from coupled_qk.train import TrainConfig
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    cfg = TrainConfig(preset="smoke", variant="hamiltonian", corpus="pydocs", max_steps=600, batch_size=8,
                      eval_every=200, eval_batches=2, ckpt_every=5, log_every=20, device="cpu")
    pool = SubmititPool("submitit-local", tmp_path / "submitit", dict(timeout_min=30, max_num_timeout=5))
    full = pool.submit(RunCall("lm", "lm-full", cfg, str(tmp_path / "full")), "full")
    cut = pool.submit(RunCall("lm", "lm-cut", cfg, str(tmp_path / "cut")), "cut")
    t = time.time()
    while not (tmp_path / "cut" / "ckpt.pt").is_file() and time.time() - t < 600:
        time.sleep(0.02)
    assert not cut.done(), "the run finished before it could be interrupted"
    ctrl = cut.job._process.pid                           # submitit's local controller; its children are the tasks
    tasks = Path(f"/proc/{ctrl}/task/{ctrl}/children").read_text().split()
    assert tasks, "the job has no running task"
    for pid in tasks:
        os.kill(int(pid), signal.SIGUSR2)                 # what the controller sends at the time limit
    while not (full.done() and cut.done()) and time.time() - t < 900:
        time.sleep(0.5)
    assert full.result()["ran"] and cut.result()["ran"]
    log = "".join(f.read_text() for f in (tmp_path / "submitit").glob(f"{cut.job.job_id}_*_log.*"))
    assert "Requeued job" in log, log[-2000:]
    res = [json.loads((tmp_path / d / "result.json").read_text()) for d in ("full", "cut")]
    assert (res[0]["val_loss"], res[0]["test_loss"]) == (res[1]["val_loss"], res[1]["test_loss"])
    assert _metrics(tmp_path / "cut") == _metrics(tmp_path / "full")


def test_failed_job_is_one_line(tmp_path, monkeypatch):
    "A run whose job fails (here: its folder holds another run's checkpoint) is one line naming it and its error."
    import torch
    from coupled_qk.registry import artifact_runs, run_dir
    from coupled_qk.runner import reproduce
    from coupled_qk.settings import UserError
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    runs = tmp_path / "runs"
    victim = [r for r in artifact_runs("steps", "smoke") if r.kind == "lm"][0]
    run_dir(victim, runs).mkdir(parents=True)
    torch.save(dict(config_hash="0" * 64, step=1, world_size=1), run_dir(victim, runs) / "ckpt.pt")
    said = []
    with pytest.raises(UserError, match="1 run\\(s\\) failed"):
        reproduce(["steps"], scale="smoke", jobs=2, runs_dir=runs, figures_dir=tmp_path / "figures", log=said.append,
                  executor="submitit-local")
    failed = [line for line in said if "FAILED" in line]
    assert len(failed) == 1 and victim.run_id in failed[0] and "CheckpointError" in failed[0], said
    assert "belongs to another run" in failed[0] and "\n" not in failed[0]


def test_two_task_job_trains_data_parallel(tmp_path, monkeypatch):
    """A job of two tasks (what a 2-GPU run gets on Slurm: one task per GPU; here two CPU tasks with gloo) trains the
    run data-parallel through the same call: the curve of one process with the same global batch."""
    from coupled_qk.executors import SubmititPool
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    data_parallel_equals_one_process(lambda folder, tasks: SubmititPool(
        "submitit-local", folder, {"tasks_per_node": 2} if tasks == 2 else None), tmp_path, 600)
