"""The trainer end to end, from the outside: the CLI functions, a real SIGKILL and resume, the divergence
guard, data parallelism with two gloo processes under torchrun, MQAR at smoke scale, GLUE on the shared
samples, and the experiment notebooks under papermill."""
import json, os, signal, subprocess, sys, time
from pathlib import Path

import pytest
from conftest import ROOT, SHARED

PY = sys.executable
TORCHRUN = Path(PY).with_name("torchrun")
# Every subprocess computes with one thread: runs that must agree bit for bit do the same arithmetic,
# and two processes fit the two cores of CI.
ENV = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONUNBUFFERED="1")
SMOKE = ["--preset", "smoke", "--corpus", "pydocs", "--device", "cpu", "--batch-size", "8", "--lr", "3e-3",
         "--warmup-steps", "5", "--eval-batches", "4", "--quiet"]
MAIN = "import sys; from coupled_qk.cli import main; sys.exit(main(['train', *sys.argv[1:]]))"


def read(run: Path, name: str):
    p = run / name
    return json.loads(p.read_text()) if name.endswith(".json") else \
        [json.loads(l) for l in p.read_text().splitlines() if l.strip()]


def losses(metrics):
    return [(r["step"], r["train_loss"], r["val_loss"], r["lr"], r["tokens"]) for r in metrics]


def test_cli_smoke_run(tmp_path, capsys):
    from coupled_qk.cli import main
    from coupled_qk.runs import config_hash
    from coupled_qk.train import TrainConfig
    train_main = lambda argv: main(["train", *argv])
    out = tmp_path / "run"
    rc = train_main(SMOKE + ["--variant", "euler", "--max-steps", "30", "--eval-every", "10", "--out", str(out)])
    assert rc == 0
    printed = capsys.readouterr().out.strip().splitlines()
    assert len(printed) == 1 and f"results in {out}" in printed[0], printed        # one result line per run
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == \
        ["ckpt.pt", "config.json", "metrics.jsonl", "result.json"]
    res = read(out, "result.json")
    for k in ("config", "config_hash", "run_id", "data", "corpus_fingerprint", "tokenizer", "tokenizer_fingerprint", "params",
              "coupling_params", "coupled_qk_version", "git_revision", "hardware", "val_loss", "val_ppl",
              "test_loss", "test_ppl", "tokens_seen", "wall_clock_s", "dt"):
        assert k in res, k
    assert res["config_hash"] == config_hash(TrainConfig(**res["config"]))
    assert res["tokens_seen"] == 30 * 8 * 64 and res["tokenizer"] == "bytes" and res["vocab_size"] == 257
    assert len(res["dt"]) == 2 and res["coupling_params"] > 0
    m = read(out, "metrics.jsonl")
    assert [r["step"] for r in m if r["val_loss"] is not None] == [0, 10, 20, 30]
    assert set(m[-1]) == {"step", "tokens", "train_loss", "val_loss", "val_ppl", "lr", "elapsed", "tokens_per_s"}
    # a second call without --resume refuses to overwrite; with --resume it returns the finished run
    assert train_main(SMOKE + ["--variant", "euler", "--max-steps", "30", "--eval-every", "10", "--out", str(out)]) == 2
    assert "--resume" in capsys.readouterr().err
    assert train_main(SMOKE + ["--variant", "euler", "--max-steps", "30", "--eval-every", "10", "--out", str(out),
                               "--resume"]) == 0


@pytest.mark.parametrize("args,needle", [
    (["--variant", "coupled"], "valid: standard, hamiltonian, euler, mlp_only, differential, coupled_differential"),
    (["--preset", "tiny"], "valid: smoke, cpu, small, paper-60m"),
    (["--max-tokens", "100"], "one budget, not both"),
])
def test_cli_rejects_bad_options(args, needle):
    """Validated before any work: one line, exit code 2, no traceback (in a real process, as a user sees it;
    tests/test_errors.py holds the full table, in-process)."""
    r = subprocess.run([PY, "-c", MAIN, *args, "--max-steps", "1"], capture_output=True, text=True, env=ENV, timeout=60)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in r.stderr, r.stderr


def test_resume_after_sigkill_is_exact(tmp_path):
    """kill -9 in the middle of a run (after steps its last checkpoint does not hold were logged), resume, and
    compare with an uninterrupted run: final losses bit for bit, and every metric of every step."""
    args = SMOKE + ["--variant", "hamiltonian", "--max-steps", "30", "--eval-every", "10", "--ckpt-every", "5",
                    "--log-every", "1"]
    # the victim stops (sleeps) at the start of 0-based step 13: checkpoint at 10, steps 11-13 logged
    victim = ("import sys, time, coupled_qk.train as T\n"
              "orig = T.lr_at\n"
              "def lr_at(step, cfg, total):\n"
              "    if step == 13: print('READY', flush=True); time.sleep(600)\n"
              "    return orig(step, cfg, total)\n"
              "T.lr_at = lr_at\n"
              "from coupled_qk.cli import main\n"
              "sys.exit(main(['train', *sys.argv[1:]]))\n")
    full = subprocess.Popen([PY, "-c", MAIN, *args, "--out", str(tmp_path / "full")], env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    p = subprocess.Popen([PY, "-c", victim, *args, "--out", str(tmp_path / "cut")], env=ENV,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    assert line.strip() == "READY", p.stderr.read()
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    assert p.returncode == -signal.SIGKILL
    cut = tmp_path / "cut"
    assert not (cut / "result.json").exists() and (cut / "ckpt.pt").exists()
    assert max(r["step"] for r in read(cut, "metrics.jsonl")) == 13       # logged past the checkpoint
    r = subprocess.run([PY, "-c", MAIN, *args, "--out", str(cut), "--resume"], env=ENV, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert full.wait(timeout=300) == 0, full.stderr.read()
    a, b = read(tmp_path / "full", "result.json"), read(cut, "result.json")
    for k in ("val_loss", "test_loss", "val_ppl", "test_ppl", "tokens_seen", "dt", "config_hash"):
        assert a[k] == b[k], (k, a[k], b[k])
    assert losses(read(tmp_path / "full", "metrics.jsonl")) == losses(read(cut, "metrics.jsonl"))


def test_divergence_stops_and_keeps_last_good_checkpoint(tmp_path, capsys):
    import math, torch
    from coupled_qk.cli import main
    train_main = lambda argv: main(["train", *argv])
    out = tmp_path / "bad"
    rc = train_main(SMOKE + ["--max-steps", "20", "--lr", "1e6", "--warmup-steps", "0", "--grad-clip", "0",
                             "--ckpt-every", "1", "--eval-every", "0", "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1 and len(err) == 1, err
    assert "training diverged" in err[0] and "non-finite" in err[0] and "lower lr" in err[0], err
    st = torch.load(out / "ckpt.pt", weights_only=True)
    assert f"at step {st['step'] + 1} " in err[0]
    assert all(torch.isfinite(v).all() for v in st["model"].values())
    assert all(math.isfinite(r["train_loss"]) for r in read(out, "metrics.jsonl") if r["train_loss"] is not None)
    assert not (out / "result.json").exists()


def test_ddp_two_gloo_processes_match_one_process(tmp_path):
    """torchrun with 2 CPU processes of batch 4 = one process of batch 8 (the same windows, the same curve)."""
    base = SMOKE + ["--variant", "hamiltonian", "--max-steps", "12", "--eval-every", "6", "--log-every", "1",
                    "--ckpt-every", "6"]
    script = tmp_path / "main.py"
    script.write_text(MAIN.replace("; ", "\n"))
    ddp = subprocess.run([str(TORCHRUN), "--standalone", "--nproc_per_node", "2", str(script), *base,
                          "--batch-size", "4", "--out", str(tmp_path / "ddp")],
                         env=ENV, capture_output=True, text=True, timeout=300)
    assert ddp.returncode == 0, ddp.stderr[-3000:]
    one = subprocess.run([PY, "-c", MAIN, *base, "--batch-size", "8", "--out", str(tmp_path / "one")],
                         env=ENV, capture_output=True, text=True, timeout=300)
    assert one.returncode == 0, one.stderr
    a, b = read(tmp_path / "ddp", "metrics.jsonl"), read(tmp_path / "one", "metrics.jsonl")
    assert [r["step"] for r in a] == [r["step"] for r in b] and [r["tokens"] for r in a] == [r["tokens"] for r in b]
    for ra, rb in zip(a, b):
        for k in ("train_loss", "val_loss"):
            if rb[k] is not None: assert abs(ra[k] - rb[k]) < 1e-5, (ra["step"], k, ra[k], rb[k])
    ra, rb = read(tmp_path / "ddp", "result.json"), read(tmp_path / "one", "result.json")
    assert ra["world_size"] == 2 and rb["world_size"] == 1
    assert abs(ra["test_loss"] - rb["test_loss"]) < 1e-5


def test_mqar_easy_smoke_learns_recall(tmp_path):
    """MQAR easy (4 pairs) with a 64-token vocabulary, standard attention, fresh examples every step, PyTorch's
    init and an untied head: real associative recall (> 0.9, far above the 0.25 of guessing one of the four
    values in the context; measured 0.9955, 0.99 at step 250), with steps-to-accuracy in the result."""
    t = time.time()
    out = tmp_path / "mqar"
    code = "import sys; from coupled_qk.cli import main; sys.exit(main(['mqar', *sys.argv[1:]]))"
    r = subprocess.run([PY, "-c", code, "--task", "easy", "--vocab-size", "64", "--seq-len", "16", "--steps", "300",
                        "--eval-every", "50", "--n-test", "500", "--lrs", "3e-3", "--device", "cpu", "--quiet",
                        "--out", str(out)], env=ENV, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert f"results in {out}" in r.stdout
    res = read(out, "result.json")
    assert res["best_lr"] == 3e-3 and len(res["sweep"]) == 1 and res["chance"] == 2 / 64
    assert res["test_acc"] > 0.9, [h["test_acc"] for h in res["sweep"][0]["history"]]
    assert res["sweep"][0]["steps_to_0.9"] is not None
    print(f"MQAR smoke: accuracy {res['test_acc']:.3f} in {time.time() - t:.1f} s")


@pytest.mark.skipif(not (SHARED / "data" / "glue").exists(), reason="needs the shared GLUE samples (../shared/data)")
def test_glue_smoke_on_shared_samples(tmp_path, capsys):
    from coupled_qk.train import TrainConfig, train
    from coupled_qk.cli import main
    glue_main = lambda argv: main(["glue", *argv])
    glue = str(SHARED / "data" / "glue")
    lm = tmp_path / "lm"
    train(TrainConfig(preset="smoke", corpus="pydocs", max_steps=20, batch_size=8, eval_every=0, eval_batches=2,
                      device="cpu"), lm, quiet=True)
    common = ["--max-eval", "200", "--epochs", "1", "--lr", "1e-3", "--device", "cpu", "--glue-dir", glue, "--quiet"]
    assert glue_main(["--task", "sst2", "--run", str(lm), "--max-train", "800", *common, "--out", str(tmp_path / "s")]) == 0
    assert glue_main(["--task", "sst2", "--run", str(lm), "--init", "scratch", "--max-train", "800", *common,
                      "--out", str(tmp_path / "c")]) == 0
    assert glue_main(["--task", "mnli", "--run", str(lm), "--max-train", "300", "--pooling", "last", *common,
                      "--out", str(tmp_path / "m")]) == 0
    assert "results in" in capsys.readouterr().out
    s, c, m = (read(tmp_path / d, "result.json") for d in "scm")
    assert s["lm_step"] == 20 and c["lm_step"] is None and s["eval_fingerprint"] == c["eval_fingerprint"]
    assert (s["n_train"], s["n_eval"]) == (800, 200) and s["split"].startswith("train / validation")
    assert m["split"].startswith("no train split") and len(m["label_names"]) == 3
    for r in (s, c, m): assert 0.0 <= r["eval_acc"] <= 1.0 and 0 < r["majority_acc"] < 1


def test_experiment_notebooks_under_papermill(tmp_path):
    import papermill as pm
    exp = ROOT / "nbs" / "experiments"
    def run(name, **params):
        out = tmp_path / f"{name}.ipynb"
        pm.execute_notebook(str(exp / f"{name}.ipynb"), str(out), parameters=params, cwd=str(exp),
                            kernel_name="python3", progress_bar=False)
        return out.read_text()
    lm = tmp_path / "lm"
    text = run("lm", config=dict(preset="smoke", variant="hamiltonian", max_steps=20, batch_size=8, warmup_steps=5,
                                 eval_every=10, eval_batches=2, device="cpu"), out_dir=str(lm))
    assert f"run_dir: {lm}" in text and (lm / "result.json").exists()
    text = run("mqar", config=dict(vocab_size=64, seq_len=16, n_test=64, steps=20, eval_every=10, lrs=[1e-3, 3e-3],
                                   device="cpu"), out_dir=str(tmp_path / "mqar"))
    assert len(read(tmp_path / "mqar", "result.json")["sweep"]) == 2
