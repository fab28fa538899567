#!/usr/bin/env bash
# One check of the GPU paths, in at most 10 minutes on one GPU (the stages' time limits add to 560 s; they are
# estimates: the script has not yet run on a GPU):
#   1. the fused coupled dynamics, the fused invertible coupling, and Differential's four flash calls (its GPU path)
#      against the reference functions, W_o's input stored, and its core in blocks (the CPU path), on CUDA
#      (float32, bf16 autocast, and torch.compile of a coupled layer), which the CPU tests cannot reach; and
#      whether SDPA's memory-efficient kernel takes Differential's wider V; meanwhile,
#      in the background, the main comparison at the smoke scale trained 2,000 steps per run (`coupled-qk
#      reproduce main_table --scale smoke --budget 66.67`: every variant, 11 runs at once on the one GPU);
#   2. the benchmark at the paper-60m shape in bf16 (every variant) and bf16+torch.compile (standard, hamiltonian
#      and coupled_differential: compiling is most of that stage's time);
#   3. the trainer's own throughput: one short compiled run of `coupled-qk train` per variant at the smoke preset,
#      one after another (120 s in all; variants not reached in time are left out), whose steady tokens/s go to
#      figures/benchmark/cuda/throughput.csv, which `coupled-qk reproduce --dry-run` reads for its GPU-hours;
#   4. one table of all, a row per variant.
# Without CUDA it says so in one line and exits 0, so it is safe to run anywhere. TRAIN_CHECK=0 skips stage 3;
# TRAIN_STEPS, TRAIN_BATCH and TRAIN_BUDGET_S size it; TRAIN_ONLY=1 runs stage 3 alone (with TRAIN_BUDGET_S=500 it
# has time for every variant; 120 s covers the first few). Results lie in $OUT (a fresh folder unless given).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=python3
if [ -x .venv/bin/python ]; then
    PY=.venv/bin/python
fi
CLI='import sys; from coupled_qk.cli import main; sys.exit(main(sys.argv[1:]))'   # "$PY" -c "$CLI" COMMAND ...
if ! "$PY" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
    echo "gpu_check: no CUDA device on this machine; nothing to check"
    exit 0
fi
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
status=0

train_check() {   # one compiled `coupled-qk train` per variant, in sequence, until the budget is spent
    local steps=${TRAIN_STEPS:-200} batch=${TRAIN_BATCH:-8} deadline=$((SECONDS + ${TRAIN_BUDGET_S:-120})) v left rc
    rm -f "$OUT/throughput.csv"
    for v in $("$PY" -c 'from coupled_qk.attention import VARIANTS; print(*VARIANTS)'); do
        left=$((deadline - SECONDS))
        if [ "$left" -lt 10 ]; then
            echo "train: budget spent; not measured from $v on"
            break
        fi
        # pystdlib: the interpreter's own library, the one embedded corpus a bare machine always has
        timeout "$left" "$PY" -c "$CLI" train \
            --preset smoke --variant "$v" --corpus pystdlib --compile --max-steps "$steps" --batch-size "$batch" \
            --warmup-steps 10 --log-every $((steps / 4)) --eval-every 0 --eval-batches 1 --ckpt-every 100000 \
            --device "${TRAIN_DEVICE:-cuda}" --quiet --overwrite --out "$OUT/train/$v" > "$OUT/train-$v.log" 2>&1
        rc=$?
        if [ ! -f "$OUT/train/$v/result.json" ]; then   # (a run that finished counts, even if its exit timed out)
            if [ "$rc" -eq 124 ]; then                   # the budget ran out: not a failure
                echo "train: budget spent during $v; not measured from $v on"
                break
            fi
            status=1
            echo "train $v failed (exit $rc):"
            tail -5 "$OUT/train-$v.log"
            continue
        fi
        # steady tokens/s: from the second logged step to the last (the first carries the compilation)
        RUN="$OUT/train/$v" CSV="$OUT/throughput.csv" MODE="train+compile" "$PY" - <<'PYEOF' || status=1
import csv, json, os
from pathlib import Path
run = Path(os.environ["RUN"])
recs = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
recs = [r for r in recs if r.get("tokens_per_s") is not None]
a, b = recs[1], recs[-1]
rate = (b["tokens"] - a["tokens"]) / (b["elapsed"] - a["elapsed"])
cfg = json.loads((run / "result.json").read_text())["config"]
row = dict(shape=cfg["preset"], variant=cfg["variant"], mode=os.environ["MODE"], batch=cfg["batch_size"],
           steps=b["step"] - a["step"], tokens_per_s=round(rate, 1),
           compile_s=round(a["elapsed"] - a["tokens"] / rate, 2))
new = not Path(os.environ["CSV"]).is_file()
with open(os.environ["CSV"], "a", newline="") as fh:
    w = csv.DictWriter(fh, fieldnames=list(row))
    if new:
        w.writeheader()
    w.writerow(row)
print(f"train {row['variant']}: {row['tokens_per_s']:,.0f} tokens/s over {row['steps']} steps "
      f"(batch {row['batch']}; first steps and compilation {row['compile_s']:.1f} s)")
PYEOF
    done
    if [ -f "$OUT/throughput.csv" ]; then
        mkdir -p figures/benchmark/cuda && cp "$OUT/throughput.csv" figures/benchmark/cuda/throughput.csv
    fi
}
if [ "${TRAIN_ONLY:-0}" = 1 ]; then    # stage 3 alone: every variant, given a budget (TRAIN_BUDGET_S=500)
    train_check
    exit $status
fi

# the smoke reproduce runs beside stage 1 (checks of values, not of speed), and is awaited before the benchmark
SMOKE_RUNS=$(mktemp -d)
COUPLED_QK_RUNS_DIR="$SMOKE_RUNS" COUPLED_QK_FIGURES_DIR="$OUT/smoke" timeout 150 "$PY" -c \
    'import sys; from coupled_qk.cli import main; sys.exit(main(sys.argv[1:]))' \
    reproduce main_table --scale smoke --budget 66.67 --jobs 11 > "$OUT/smoke.log" 2>&1 &
smoke=$!

echo "== 1. fused dynamics and coupling vs reference on CUDA"
timeout 90 "$PY" - <<'PYEOF' || status=1
import torch
from coupled_qk.integrators import INTEGRATORS, FORCES, CoupledDynamics, integrate_fused

def worst_error(got, want):
    "The largest relative error (by norm) over matching tensors."
    return max(((a.float() - b.float()).norm() / (b.float().norm() + 1e-12)).item() for a, b in zip(got, want))

dev = torch.device("cuda")
torch.manual_seed(0)
worst = {}
for method in INTEGRATORS:
    for force in FORCES:
        for shared in (True, False):
            f = FORCES[force](64, n_heads=8, shared=shared).to(dev)
            dt = torch.linspace(-0.2, 0.3, 8, device=dev).requires_grad_()
            qkv = torch.randn(4, 256, 3, 8, 64, device=dev, requires_grad=True)
            for dtype in (torch.float32, torch.bfloat16):
                grads = []
                for fused in (False, True):
                    q, k, _ = qkv.permute(2, 0, 3, 1, 4)
                    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
                        run = integrate_fused if fused else (lambda m, *a: INTEGRATORS[m](*a))
                        out = run(method, q, k, f, dt, 2)
                    loss = (out[0].float().sin().sum() + out[1].float().square().sum())
                    grads.append([*out, *torch.autograd.grad(loss, [qkv, dt, *f.parameters()])])
                err = worst_error(*grads)
                worst[(method, force, shared, str(dtype))] = err
                assert err < (1e-4 if dtype == torch.float32 else 5e-2), (method, force, shared, dtype, err)
print(f"fused vs reference: {len(worst)} cases, worst relative error "
      f"float32 {max(v for k, v in worst.items() if 'float32' in k[3]):.1e}, "
      f"bf16 {max(v for k, v in worst.items() if 'bfloat16' in k[3]):.1e}")
dyn = CoupledDynamics("hamiltonian", 8, 64).to(dev)
q, k = torch.randn(2, 4, 8, 128, 64, device=dev).unbind(0)
q.requires_grad_(), k.requires_grad_()
eager = dyn(q, k)
compiled = torch.compile(dyn)(q, k)
ge = torch.autograd.grad(sum(o.square().sum() for o in eager), [q, k, dyn.dt])
gc = torch.autograd.grad(sum(o.square().sum() for o in compiled), [q, k, dyn.dt])
for a, b in zip([*eager, *ge], [*compiled, *gc]):
    torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
print("torch.compile of a fused coupled layer: same values and gradients as eager")
from coupled_qk.invertible import InvertibleCoupling, perturb_coupling
coup = perturb_coupling(InvertibleCoupling(8, 64), std=0.3).to(dev)
qkv = torch.randn(4, 256, 3, 8, 64, device=dev, requires_grad=True)
for dtype in (torch.float32, torch.bfloat16):
    grads = []
    for fused in (False, True):
        coup.fused = fused
        q, k, _ = qkv.permute(2, 0, 3, 1, 4)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
            out = coup(q, k)
        loss = out[0].float().sin().sum() + out[1].float().square().sum()
        grads.append([*out, *torch.autograd.grad(loss, [qkv, *coup.parameters()])])
    err = worst_error(*grads)
    assert err < (1e-4 if dtype == torch.float32 else 5e-2), ("invertible coupling", dtype, err)
    print(f"fused invertible coupling vs plain, {dtype}: worst relative error {err:.1e}")
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from coupled_qk.attention import AttentionConfig, build_attention
x = torch.randn(4, 256, 512, device=dev)
for dtype in (torch.float32, torch.bfloat16):
    grads = {}
    # the GPU's path (four flash calls, W_o's input recomputed), against it stored, and against the core in blocks
    for label, core, recompute in (("flash", "flash", True), ("stored", "flash", False), ("blocks", "blocks", True)):
        torch.manual_seed(1)
        m = build_attention(AttentionConfig("differential", recompute=recompute), 512, 8, layer_idx=2).to(dev)
        m.core = core
        xr = x.clone().requires_grad_()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
            y = m(xr)
        grads[label] = [y, *torch.autograd.grad(y.float().square().sum(), [xr, *m.parameters()])]
    for other in ("stored", "blocks"):
        err = worst_error(grads[other], grads["flash"])
        assert err < (1e-4 if dtype == torch.float32 else 5e-2), ("differential", other, dtype, err)
        print(f"differential, four flash calls vs {other}, {dtype}: worst relative error {err:.1e}")
q = torch.randn(4, 4, 256, 64, device=dev, dtype=torch.bfloat16)
v = torch.randn(4, 4, 256, 128, device=dev, dtype=torch.bfloat16)
try:   # if it does, Differential's flash path could score each map once instead of twice
    with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION):
        F.scaled_dot_product_attention(q, q, v, is_causal=True)
    print("SDPA's memory-efficient kernel takes a V twice as wide as q and k")
except RuntimeError as e:
    print(f"SDPA's memory-efficient kernel refuses a V twice as wide as q and k: {str(e).splitlines()[0]}")
PYEOF

echo "== 1. main comparison at the smoke scale, 2,000 steps per run (started beside the checks above)"
if wait "$smoke"; then
    tail -1 "$OUT/smoke.log"
else
    status=1
    tail -20 "$OUT/smoke.log"
fi

bench() {   # bench <seconds> <out> <args...>
    local limit=$1 out=$2
    shift 2
    timeout "$limit" "$PY" -c "$CLI" bench \
        --device cuda --shapes paper-60m --quiet --out "$out" "$@" > "$out.log" 2>&1 \
        || { status=1; tail -20 "$out.log"; }
}
echo "== 2. benchmark, paper-60m, bf16 (every variant)"
bench 140 "$OUT/bf16" --modes bf16 --repeats 2 --warmup 3 --steps 10
# the measured tokens/s replace the per-device guess in `coupled-qk reproduce --scale paper --dry-run`'s GPU-hours
if [ -f "$OUT/bf16/summary.csv" ]; then
    mkdir -p figures/benchmark/cuda && cp "$OUT/bf16/summary.csv" figures/benchmark/cuda/summary.csv
fi
echo "== 2. benchmark, paper-60m, bf16+compile (standard, hamiltonian, coupled_differential)"
bench 140 "$OUT/compile" --modes bf16+compile --repeats 1 --warmup 3 --steps 10 \
    --variants standard hamiltonian coupled_differential

echo "== 3. compiled training runs, smoke preset, one per variant (tokens/s to figures/benchmark/cuda/throughput.csv)"
if [ "${TRAIN_CHECK:-1}" != 0 ]; then
    train_check
fi

echo "== 4. one table ($OUT)"
OUT="$OUT" "$PY" - <<'PYEOF'
import os, pandas as pd
from pathlib import Path
from coupled_qk.attention import ATTENTION
from coupled_qk.provenance import hardware
out = Path(os.environ["OUT"])
parts = []   # one frame per source, indexed by variant
for mode in ("bf16", "compile"):
    f = out / mode / "summary.csv"
    if f.is_file():
        b = pd.read_csv(f).set_index("variant")
        cols = ["tokens_per_s", "tokens_per_s_ratio", "flop_limit", "of_limit", "peak_mem_ratio", "target"]
        parts.append(b[cols].add_prefix(f"{mode} "))
f = out / "throughput.csv"
if f.is_file():
    t = pd.read_csv(f).set_index("variant")
    parts.append(t[["tokens_per_s", "compile_s"]].add_prefix("train smoke+compile "))
f = out / "smoke" / "smoke" / "main_table" / "main_table.csv"
if f.is_file():
    m = pd.read_csv(f).set_index("variant")
    parts.append(m[["n runs", "val ppl", "Δ vs standard % (paired)", "95% CI % (paired t)",
                    "overhead %"]].add_prefix("smoke 2k: "))
print(hardware())
if parts:
    table = pd.concat(parts, axis=1)
    print(table.reindex([v for v in ATTENTION if v in table.index]).rename_axis("variant").to_markdown(floatfmt=".3g"))
else:
    print("no results")
PYEOF
exit $status
