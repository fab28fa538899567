"""The Hugging Face adapter under torch.compile's default backend (inductor), and on a real pretrained model. The
chapter nbs/14_hf.ipynb tests every other invariant on tiny random models, and compilation with the fast `aot_eager`
backend; inductor generates and builds C++ kernels, about a minute on a 2-core CPU, so it runs here, once. Each
inductor case runs in its own interpreter: dynamo's caches print harmless KeyErrors when an interpreter that
compiled exits, which would follow pytest's closing line. The real model's invariants (SmolLM2-135M) follow below."""
import subprocess
import sys

import pytest

pytest.importorskip("transformers", reason="the Hugging Face adapter needs the optional extra: pip install coupled_qk[hf]")

CASE = r'''
import sys, torch
import torch.nn.functional as F
from transformers import LlamaConfig, LlamaForCausalLM
from coupled_qk.hf import QKCoupling, add_coupling, coupling_parameters
from coupled_qk.invertible import perturb_coupling
torch.manual_seed(0)
cfg = LlamaConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                  intermediate_size=128, vocab_size=97, max_position_embeddings=64)
model = add_coupling(LlamaForCausalLM._from_config(cfg), sys.argv[1])
with torch.no_grad():          # away from the identity, so that the coupling's own kernels matter
    for m in model.modules():
        if isinstance(m, QKCoupling) and m.dynamics is not None:
            m.dynamics.dt.fill_(0.3)
perturb_coupling(model, 0.3)
ids = torch.randint(0, 97, (2, 16))

def loss_and_grads(m):
    logits = m(ids).logits
    return logits, torch.autograd.grad(F.cross_entropy(logits[0], ids[0]), coupling_parameters(model))

eager, g_eager = loss_and_grads(model)
compiled, g = loss_and_grads(torch.compile(model))
torch.testing.assert_close(compiled, eager, rtol=1e-5, atol=1e-5)
for a, b in zip(g, g_eager):
    torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5 * b.abs().max().item())
print("inductor matches eager")
'''


@pytest.mark.parametrize("variant", ["hamiltonian", "invertible"])
def test_inductor_matches_eager(variant):
    p = subprocess.run([sys.executable, "-c", CASE, variant], capture_output=True, text=True, timeout=900)
    assert p.returncode == 0 and "inductor matches eager" in p.stdout, p.stderr[-3000:]


# --- The adapter on real pretrained weights: SmolLM2-135M (coupled_qk.pretrained), exactly. The model is built once
# into data_dir (a pinned wheel from the package index, dequantised: about a minute) and loaded once per session; each
# test couples a copy that shares its weights. Inputs are 24 tokens, so the 30-layer model stays cheap on a 2-core CPU.
import copy

import torch

TEXT = ("The Hugging Face adapter couples each attention head's query and key before rotary encoding, so a pretrained "
        "model starts unchanged and learns how far to move.")


@pytest.fixture(scope="session")
def smollm():
    from coupled_qk.pretrained import DownloadError, pretrained
    try:
        model, tok = pretrained("smollm2-135m")
    except DownloadError as e:      # no package index here: the one reason to skip
        pytest.skip(f"SmolLM2-135M is not built here and cannot be fetched: {e}")
    ids = tok(TEXT, return_tensors="pt").input_ids[:, :24]
    assert ids.shape == (1, 24) and len(tok) == 49152 and model.config.num_hidden_layers == 30
    model.requires_grad_(False)     # the base stays frozen in every test
    with torch.no_grad():
        logits = model(ids).logits
    return model, tok, ids, logits


def coupled_copy(model, variant: str, **fields):
    "`add_coupling` on a copy of `model` that shares its weights (no 0.5 GB copy): the fixture's model stays plain."
    from coupled_qk.hf import add_coupling
    shared = {id(t): t for t in (*model.parameters(), *model.buffers())}
    torch.manual_seed(0)
    return add_coupling(copy.deepcopy(model, memo=shared), variant, **fields)


def away_from_identity(model, dt=0.05, std=0.05):
    "A non-trivial coupling: Δt = dt in every head, the invertible maps' zero layers drawn N(0, std²) (seeded)."
    from coupled_qk.hf import couplings
    from coupled_qk.invertible import perturb_coupling
    with torch.no_grad():
        for m in couplings(model).values():
            if m.dynamics is not None:
                m.dynamics.dt.fill_(dt)
    return perturb_coupling(model, std, 0)


@pytest.mark.parametrize("variant", ["hamiltonian", "euler", "mlp_only", "invertible"])
def test_real_model_identity_at_init(smollm, variant):
    "Coupled and not yet trained, the pretrained model's logits bit for bit; away from the identity, other logits."
    model, _, ids, base = smollm
    coupled = coupled_copy(model, variant)
    with torch.no_grad():
        assert torch.equal(coupled(ids).logits, base)
        moved = away_from_identity(coupled)(ids).logits
    assert (moved - base).abs().max() > 1e-3, variant


@pytest.mark.parametrize("variant", ["hamiltonian", "invertible"])
def test_real_model_generate_with_and_without_cache(smollm, variant):
    "With a non-trivial coupling, greedy generation through the KV cache gives the tokens the full passes give."
    model, tok, ids, _ = smollm
    coupled = away_from_identity(coupled_copy(model, variant))
    greedy = dict(max_new_tokens=6, do_sample=False, pad_token_id=tok.eos_token_id)
    with torch.no_grad():
        cached = coupled.generate(ids[:, :16], use_cache=True, **greedy)
        uncached = coupled.generate(ids[:, :16], use_cache=False, **greedy)
    assert cached.shape == (1, 22) and torch.equal(cached, uncached), (cached, uncached)


def test_real_model_save_and_reload_exact(smollm, tmp_path):
    "save_pretrained, then from_pretrained + add_coupling(**config.coupled_qk) + load_coupling: the same logits exactly."
    from transformers import AutoModelForCausalLM
    from coupled_qk.hf import add_coupling, load_coupling
    model, _, ids, _ = smollm
    coupled = away_from_identity(coupled_copy(model, "hamiltonian", n_steps=2))
    coupled.save_pretrained(tmp_path)
    again = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    load_coupling(add_coupling(again, **again.config.coupled_qk), tmp_path)
    with torch.no_grad():
        assert torch.equal(again(ids).logits, coupled(ids).logits)


def test_real_model_one_coupled_step_lowers_the_loss(smollm):
    "Base frozen, the coupling trained (AdamW): one step on a fixed batch lowers that batch's loss."
    from coupled_qk.hf import coupling_parameters
    model, _, ids, _ = smollm
    coupled = coupled_copy(model, "hamiltonian").train()
    params = coupling_parameters(coupled)
    assert params and all(p.requires_grad for p in params)
    opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.0)
    loss = coupled(ids, labels=ids).loss
    loss.backward()
    assert all(p.grad is None for n, p in coupled.named_parameters() if ".coupling." not in n)
    opt.step()
    with torch.no_grad():
        after = coupled(ids, labels=ids).loss
    assert after < loss.detach(), (loss.item(), after.item())


def test_real_model_split_at_the_top_layers_is_exact(smollm):
    "The adapt chapter's split: the suffix of the prefix is SmolLM2-135M, bit for bit (what the cached base rests on)."
    from coupled_qk.adapters import split_at
    model, _, ids, base = smollm
    prefix, suffix = split_at(model, 28)
    with torch.no_grad():
        h = prefix(input_ids=ids, use_cache=False).last_hidden_state
        assert torch.equal(suffix(inputs_embeds=h, use_cache=False).logits, base)


def test_real_model_adaptation_resumes_exactly(smollm, tmp_path, monkeypatch):
    """An adaptation (coupling + LoRA) stopped after its step-2 checkpoint and run again ends where an uninterrupted run
    ends: the same losses, scores and adapter weights, bit for bit; its result counts what each method trains."""
    import json
    from coupled_qk import adapt as A
    from coupled_qk.adapters import coupling_count, lora_per_rank
    cfg = A.AdaptConfig(method="coupling_lora", top_layers=1, steps=4, batch_size=2, seq_len=32, warmup_steps=1,
                        val_batches=1, test_scoring="prefix", test_batches=1, lr=2e-3, coupling_lr=2e-2, ckpt_every=2)
    whole = A.adapt(cfg, tmp_path / "whole", quiet=True)
    real = A.cosine_lr

    def stop_at_step_3(step, *a):
        if step == 3:
            raise KeyboardInterrupt("stopped")
        return real(step, *a)
    monkeypatch.setattr(A, "cosine_lr", stop_at_step_3)
    with pytest.raises(KeyboardInterrupt):
        A.adapt(cfg, tmp_path / "resumed", quiet=True)
    assert (tmp_path / "resumed" / "ckpt.pt").is_file() and not (tmp_path / "resumed" / "result.json").exists()
    monkeypatch.setattr(A, "cosine_lr", real)
    again = A.adapt(cfg, tmp_path / "resumed", quiet=True)
    for k in ("val_loss", "test_loss", "learned_dt", "trainable_params", "adapter_params", "lora_rank"):
        assert again[k] == whole[k], k
    losses = [[json.loads(x)["loss"] for x in (tmp_path / d / "metrics.jsonl").read_text().splitlines()]
              for d in ("whole", "resumed")]
    assert losses[0] == losses[1] and len(losses[0]) == 4
    assert whole["adapter_params"]["lora"] == whole["lora_rank"] * lora_per_rank(smollm[0], cfg)
    assert whole["adapter_params"]["coupling"] == coupling_count(smollm[0], cfg)
