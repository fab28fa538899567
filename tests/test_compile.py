"""Compiled training (`TrainConfig.compile`, `coupled-qk train --compile`, `reproduce --compile`) with inductor, the
default backend. It builds C++ kernels, tens of seconds per variant on a 2-core CPU, so it runs here and not in the
training chapter; each variant runs in its own interpreter (dynamo's caches print harmless KeyErrors at the exit of
an interpreter that compiled). What it proves, per variant:
- compiled training is numerically close to eager training (same config, same batches);
- more steps and more evaluations compile nothing more: no recompiles within a run;
- a compiled run interrupted and resumed (in a fresh compiler state, as after a kill) ends exactly where the
  uninterrupted compiled run ends.
Exactness needs one thread per run, which is what `reproduce` gives each job when jobs = cores: with two OpenMP
threads inductor's CPU kernels are not bitwise repeatable (two fresh compiled runs differed by ~1e-8 in the weights,
measured on torch 2.13's CPU build), while eager training is exact at any thread count."""
import os
import subprocess
import sys

import pytest

CASE = r'''
import dataclasses, math, sys, tempfile
from pathlib import Path
import torch
from torch._dynamo.utils import counters
from coupled_qk.train import TrainConfig, train
tmp = Path(tempfile.mkdtemp())
base = TrainConfig(preset="smoke", variant=sys.argv[1], corpus="pydocs", seed=0, max_steps=12, batch_size=4, lr=3e-3,
                   warmup_steps=2, eval_every=4, eval_batches=2, log_every=1, ckpt_every=100)
eager = train(base, tmp / "eager", quiet=True)
cc = dataclasses.replace(base, compile=True)

def graphs(cfg, out, **kw):
    torch._dynamo.reset()
    counters.clear()
    res = train(cfg, out, quiet=True, **kw)
    return res, counters["stats"]["unique_graphs"]

full, n_full = graphs(cc, tmp / "full")
for k in ("val_loss", "test_loss"):
    assert math.isclose(full[k], eager[k], rel_tol=2e-4), (k, full[k], eager[k])
# the same run stopped after 6 steps and one evaluation, in a fresh compiler state, compiled as many graphs as the whole
# run with its three evaluations and the test set's: nothing recompiles within a run
part, n_part = graphs(cc, tmp / "resumed", stop_at=6)
assert part == {} and n_full == n_part > 0, f"recompiled within a run: {n_part} graphs for 6 steps, {n_full} for 12"
torch._dynamo.reset()
resumed = train(cc, tmp / "resumed", quiet=True)
assert (resumed["val_loss"], resumed["test_loss"]) == (full["val_loss"], full["test_loss"]), (resumed, full)
a = torch.load(tmp / "full" / "ckpt.pt", weights_only=False)["model"]
b = torch.load(tmp / "resumed" / "ckpt.pt", weights_only=False)["model"]
assert all(torch.equal(a[k], b[k]) for k in a)
print(f"compiled training ok: {n_full} graphs; val loss {full['val_loss']:.6f} (eager {eager['val_loss']:.6f})")
'''


@pytest.mark.parametrize("variant", ["hamiltonian", "invertible_differential"])
def test_compiled_training(variant):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.run([sys.executable, "-c", CASE, variant], capture_output=True, text=True, timeout=1200, env=env)
    assert p.returncode == 0 and "compiled training ok" in p.stdout, (p.stdout[-1000:], p.stderr[-3000:])
    print(p.stdout.strip().splitlines()[-1])
