"""The Hugging Face adapter under torch.compile's default backend (inductor). The chapter nbs/14_hf.ipynb tests
every other invariant, and compilation with the fast `aot_eager` backend; inductor generates and builds C++
kernels, about a minute on a 2-core CPU, so it runs here, once. Each case runs in its own interpreter: dynamo's
caches print harmless KeyErrors when an interpreter that compiled exits, which would follow pytest's closing line."""
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
