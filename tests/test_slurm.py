"""`--executor slurm` against a real one-node Slurm cluster started for these tests (Debian's slurm-wlm: munged,
slurmctld and slurmd on a temporary state folder, no accounting, so job states come from squeue): the same run ids
and perplexities as `--executor local`; a second `reproduce` follows the jobs of the first and submits only what is
missing; a job preempted, then at its time limit, is requeued and resumes exactly each time; a two-task job trains
data-parallel through srun; sbatch's refusals are one line naming the setting. Where no cluster can be started
(not root, or neither the daemons nor apt-get), every test here is skipped with one line saying why."""
import contextlib
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, data_parallel_equals_one_process

CLI = [str(Path(sys.executable).with_name("coupled-qk"))]
# A CPU partition: no GPU, one CPU and 1 GB a run, runs of one thread
SMALL = dict(COUPLED_QK_SLURM_GPUS_PER_RUN="0", COUPLED_QK_SLURM_CPUS_PER_RUN="1", COUPLED_QK_SLURM_MEM_GB="1",
             COUPLED_QK_SLURM_TIME_MIN="10", OMP_NUM_THREADS="1")

# One cluster per test run: under pytest-xdist every Slurm test runs on one worker (conftest.ONE_WORKER).


def _sh(*cmd, check=True, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, check=check, timeout=timeout)


def _install() -> str | None:
    "Debian's slurm-wlm where it is missing; the reason it cannot be, else None."
    if shutil.which("slurmctld") and shutil.which("munged"):
        return None
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return "no Slurm here (slurmctld, munged) and no way to install it (needs root and apt-get)"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for update in (False, True):
        if update:
            subprocess.run(["apt-get", "update", "-q"], capture_output=True, env=env, timeout=600)
        p = subprocess.run(["apt-get", "install", "-y", "-q", "-o", "DPkg::Lock::Timeout=300", "slurm-wlm"],
                           capture_output=True, text=True, env=env,
                           timeout=900)
        if p.returncode == 0:
            return None
    return f"apt-get install slurm-wlm failed: {(p.stderr.strip().splitlines() or ['?'])[-1]}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    """A one-node Slurm cluster for this test session: SLURM_CONF points sbatch, squeue and scontrol at it. Its
    scheduler runs every 2 s, a requeued job waits 10 s (cred_expire) instead of 120, and partition limits are
    enforced at submission (EnforcePartLimits=ALL), as on many clusters."""
    if os.geteuid() != 0:
        pytest.skip("a Slurm cluster for the tests needs root (slurmd runs jobs as their user)")
    why = _install()
    if why:
        pytest.skip(why)
    d = tmp_path_factory.mktemp("slurm")
    for sub in ("state", "spool", "log"):
        (d / sub).mkdir()
    key = d / "munge.key"
    key.write_bytes(os.urandom(128))
    key.chmod(0o600)
    host = socket.gethostname()
    mem = int(int(Path("/proc/meminfo").read_text().split()[1]) / 1024 * 0.8)
    conf = d / "slurm.conf"
    conf.write_text("\n".join([
        "ClusterName=tests", f"SlurmctldHost={host}(127.0.0.1)", "SlurmUser=root", "SlurmdUser=root",
        f"SlurmctldPort={_free_port()}", f"SlurmdPort={_free_port()}", "AuthType=auth/munge", "CredType=cred/munge",
        f"AuthInfo=socket={d}/munge.sock,cred_expire=10", f"StateSaveLocation={d}/state", f"SlurmdSpoolDir={d}/spool",
        f"SlurmctldPidFile={d}/slurmctld.pid", f"SlurmdPidFile={d}/slurmd.pid",
        f"SlurmctldLogFile={d}/log/slurmctld.log", f"SlurmdLogFile={d}/log/slurmd.log",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
        "SelectType=select/cons_tres", "SelectTypeParameters=CR_CPU_Memory", "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none", "MpiDefault=none", "ReturnToService=2", "MinJobAge=60",
        "DefMemPerCPU=1000", "EnforcePartLimits=ALL", "SchedulerParameters=sched_interval=2,bf_interval=2",
        f"NodeName={host} NodeAddr=127.0.0.1 CPUs={min(os.cpu_count() or 1, 2)} RealMemory={mem} State=UNKNOWN",
        "PartitionName=debug Nodes=ALL Default=YES MaxTime=30 State=UP", ""]))
    mp = pytest.MonkeyPatch()
    mp.setenv("SLURM_CONF", str(conf))
    try:
        _sh("munged", "--force", f"--key-file={key}", f"--socket={d}/munge.sock", f"--pid-file={d}/munged.pid",
            f"--seed-file={d}/munged.seed", f"--log-file={d}/log/munged.log")
        _sh("slurmctld")
        _sh("slurmd")
        t = time.time()
        while _sh("sinfo", "-h", "-o", "%T", check=False).stdout.strip() != "idle":
            if time.time() - t > 60:
                log = (d / "log" / "slurmctld.log").read_text()
                raise RuntimeError(f"the test cluster did not come up: {log[-1500:]}")
            time.sleep(0.5)
        yield d
    finally:
        _sh("scancel", "--me", check=False)
        time.sleep(1)
        for name in ("slurmd", "slurmctld", "munged"):
            pid = d / f"{name}.pid"
            if pid.is_file():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid.read_text().split()[0]), signal.SIGTERM)
        mp.undo()


def _ppl(figs: Path) -> dict:
    return {p.stem: (json.loads(p.read_text())["result"]["val_ppl"], json.loads(p.read_text())["result"]["test_ppl"])
            for p in (figs / "smoke" / "runs").glob("*.json")}


def test_slurm_equals_local_and_a_second_reproduce_follows(cluster, tmp_path):
    """`reproduce steps --scale smoke --executor slurm` submits its runs as one job array; stopped at once, its jobs
    go on. One job is cancelled; a second `reproduce` follows the others (squeue), resubmits only the cancelled run,
    collects everything, and gives the run ids and perplexities of `--executor local`."""
    cmd = [*CLI, "reproduce", "steps", "--scale", "smoke", "--jobs", "2"]
    env = {ex: dict(os.environ, **SMALL, COUPLED_QK_RUNS_DIR=str(tmp_path / ex / "runs"),
                    COUPLED_QK_FIGURES_DIR=str(tmp_path / ex / "figures")) for ex in ("local", "slurm")}
    local = subprocess.Popen(cmd, env=env["local"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    jobs = tmp_path / "slurm" / "runs" / "submitit" / "jobs.json"
    first = subprocess.Popen([*cmd, "--executor", "slurm"], env=env["slurm"], cwd=ROOT, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    t = time.time()
    while not jobs.is_file() and first.poll() is None and time.time() - t < 300:
        time.sleep(0.1)
    first.terminate()                                     # the reproduce stops; its Slurm jobs do not
    first.wait()
    ids = json.loads(jobs.read_text())
    from coupled_qk.registry import artifact_runs
    n = len(artifact_runs("steps", "smoke"))                  # every step count, and Euler beside Hamiltonian at n = 4
    assert len(ids) == n and len({i.split("_")[0] for i in ids.values()}) == 1, ids     # one job array
    victim = sorted(ids, key=lambda k: ids[k])[-1]
    _sh("scancel", ids[victim])
    second = subprocess.run([*cmd, "--executor", "slurm"], env=env["slurm"], cwd=ROOT, capture_output=True, text=True,
                            timeout=600)
    assert second.returncode == 0, second.stderr[-2000:]
    again = json.loads(jobs.read_text())
    assert again[victim] != ids[victim] and {k: v for k, v in again.items() if k != victim} == \
        {k: v for k, v in ids.items() if k != victim}, (ids, again)
    assert "following" in second.stdout, second.stdout
    out, err = local.communicate(timeout=600)
    assert local.returncode == 0, err[-2000:]
    got = {ex: _ppl(tmp_path / ex / "figures") for ex in ("local", "slurm")}
    assert len(got["local"]) == n and got["local"] == got["slurm"]


def _metrics(d: Path) -> list:
    return [{k: v for k, v in json.loads(line).items() if k not in ("elapsed", "tokens_per_s")}
            for line in (d / "metrics.jsonl").read_text().splitlines()]


def _logs(folder: Path, job_id) -> str:
    return "".join(f.read_text() for f in folder.glob(f"{job_id}_*_log.*"))


def _params(**kw) -> dict:
    return {**dict(nodes=1, gpus_per_node=0, tasks_per_node=1, cpus_per_task=1, mem_gb=1, timeout_min=10), **kw}


def _end_soon(job_id) -> None:
    """Lower a running job's time limit to the second whole minute ahead of its run time. Submitted with
    `--signal=USR2@90`, it is signalled at slurmctld's next time-limit check (every 30 s; the warning goes out once
    `now + 90 + 30 >= end`), at least 30 s before the check that would kill it."""
    rt = re.search(r"RunTime=(?:(\d+)-)?(\d+):(\d+):(\d+)", _sh("scontrol", "show", "job", str(job_id)).stdout)
    d, h, m, _ = (int(x or 0) for x in rt.groups())
    _sh("scontrol", "update", f"JobId={job_id}", f"TimeLimit={(d * 24 + h) * 60 + m + 2}")


def test_preemption_then_time_limit_requeue_and_resume_exactly(cluster, tmp_path, monkeypatch):
    """One job is preempted (`scancel --signal=USR2`) once it has a checkpoint; back from the queue and checkpointing
    again, it is brought to its time limit, so that Slurm sends USR2 `slurm_signal_delay_s` before it. Each time
    submitit checkpoints and requeues (`scontrol requeue`), and the job resumes from its checkpoint: it ends with the
    metrics of the same run never interrupted, trained beside it."""
    from coupled_qk.executors import SubmititPool
    from coupled_qk.calls import RunCall
    from coupled_qk.train import TrainConfig
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    cfg = TrainConfig(preset="smoke", variant="hamiltonian", corpus="pydocs", max_steps=3000, batch_size=8,
                      eval_every=150, eval_batches=2, ckpt_every=25, log_every=15, device="cpu")
    # slurmctld sends --signal's warning up to 30 s early and checks time limits every 30 s, so a job submitted with a
    # 1-minute limit is signalled anywhere from its start on: on a loaded machine before submitit has installed its
    # handler, and USR2's default action kills it (a CI run ended so). So the job is submitted with 10 minutes and,
    # once it has a checkpoint (its handler is in place), its limit is lowered to end a minute or two later. submitit
    # counts either signal as a time-out: its guaranteed walltime, min(0.8 * 10, 10 - 10) minutes, is 0.
    full = SubmititPool("slurm", tmp_path / "sub", _params()).submit(
        RunCall("lm", "lm-full", cfg, str(tmp_path / "full")), "full")
    folder, ckpt = tmp_path / "limited", tmp_path / "twice" / "ckpt.pt"
    h = SubmititPool("slurm", folder, _params(timeout_min=10, slurm_signal_delay_s=90)).submit(
        RunCall("lm", "lm-twice", cfg, str(tmp_path / "twice")), "twice")
    t = time.time()

    def wait(until, what):
        while not until():
            assert not h.done(), f"the run finished before {what}: give it more steps"
            assert time.time() - t < 600, f"no {what} within 10 minutes"
            time.sleep(0.1)
    wait(ckpt.is_file, "its first checkpoint")
    _sh("scancel", "--signal=USR2", h.job_id)
    wait(lambda: "Requeued job" in _logs(folder, h.job_id), "the requeue after preemption")
    first = ckpt.stat().st_mtime_ns                   # the preempted attempt writes nothing after its requeue
    wait(lambda: ckpt.stat().st_mtime_ns != first, "a checkpoint from its second attempt")
    _end_soon(h.job_id)
    wait(lambda: _logs(folder, h.job_id).count("Requeued job") == 2, "the requeue at its time limit")   # stdout only
    _sh("scontrol", "update", f"JobId={h.job_id}", "TimeLimit=10", check=False)   # its third attempt runs to the end
    while not (h.done() and full.done()) and time.time() - t < 1200:
        time.sleep(1)
    assert h.result()["ran"] and full.result()["ran"]
    log = _logs(folder, h.job_id)
    assert log.count("Requeued job") == 2 and "timed-out" in log, log[-2000:]
    assert _metrics(tmp_path / "twice") == _metrics(tmp_path / "full")


def test_two_task_job_trains_data_parallel_through_srun(cluster, tmp_path, monkeypatch):
    "A Slurm job of two tasks (srun starts both, gloo on CPU) trains the curve of one task with the same global batch."
    from coupled_qk.executors import SubmititPool
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    data_parallel_equals_one_process(lambda folder, tasks: SubmititPool(
        "slurm", folder, _params(**({"tasks_per_node": 2} if tasks == 2 else {}))), tmp_path, 300)


@pytest.mark.parametrize("env, needle", [
    ({"COUPLED_QK_SLURM_GPUS_PER_RUN": "1"}, "slurm_gpus_per_run = 0"),
    ({"COUPLED_QK_SLURM_PARTITION": "nosuch"}, "COUPLED_QK_SLURM_PARTITION"),
    ({"COUPLED_QK_SLURM_TIME_MIN": "60"}, "set slurm_time_min at or under the partition's limit"),
    ({"COUPLED_QK_SLURM_CPUS_PER_RUN": "64"}, "slurm_cpus_per_run"),
], ids=["gpus-on-a-cpu-cluster", "partition", "time-limit", "cpus"])
def test_sbatch_refusal_is_one_line(cluster, env, needle, tmp_path, monkeypatch):
    "What sbatch refuses is one line naming the setting, exit 2, before any work: nothing queued, nothing written."
    from coupled_qk.cli import main
    for k, v in {**SMALL, "COUPLED_QK_RUNS_DIR": str(tmp_path / "runs"), "COUPLED_QK_FIGURES_DIR": str(tmp_path / "f"),
                 **env}.items():
        monkeypatch.setenv(k, v)
    queued = set(_sh("squeue", "--me", "-h", "-o", "%i").stdout.split())   # earlier tests' jobs may still be ending
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = main(["reproduce", "steps", "--scale", "smoke", "--executor", "slurm"])
    lines = err.getvalue().strip().splitlines()
    assert rc == 2 and len(lines) == 1 and "Traceback" not in err.getvalue(), err.getvalue()
    assert needle in lines[0] and "sbatch refused the job" in lines[0], lines[0]
    assert not list(tmp_path.iterdir()) and set(_sh("squeue", "--me", "-h", "-o", "%i").stdout.split()) <= queued
