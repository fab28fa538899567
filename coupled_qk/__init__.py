"""Coupled query-key dynamics for attention: a literate, reproducible companion to Gahtan & Bronstein (2026)

Modules:

- `coupled_qk.attention`: One causal self-attention module per variant: `standard`, the coupled `hamiltonian`, `euler` and `mlp_only`, Differential Attention (`differential`), our combination, `coupled_differential`, and the invertible coupling on either, `invertible` and `invertible_differential`.
- `coupled_qk.bench`: Training throughput, peak memory and model FLOPs utilisation of every attention variant, measured side by side in one run: variants interleaved over repeats, medians, and ratios to `standard`.
- `coupled_qk.cli`: `coupled-qk`: one entry point for the project's jobs. Each subcommand validates its options before any work starts and prints where its results went.
- `coupled_qk.corpora`: Every text the experiments see comes through this module: the hub, local copies and the embedded corpora, prepared once per source (`coupled-qk data prepare NAME`), fingerprinted, pinned, and recorded in a manifest. prepared once by one command (`coupled-qk data prepare NAME`), fingerprinted, and recorded in a manifest.
- `coupled_qk.glue`: Sentence classification (SST-2, MNLI, QNLI) from a trained language model — and the same architecture trained from scratch as the control.
- `coupled_qk.integrators`: Coupled query–key dynamics: q and k evolve together, like position and momentum, for n steps of a learned dynamical system before attention scores them.
- `coupled_qk.invertible`: The paper's later method: per head, q and k are coupled by an invertible map — two alternating affine coupling maps, the identity at initialisation — before attention scores them.
- `coupled_qk.model`: A nanoGPT-style decoder that takes any attention variant: pre-norm blocks, tied embeddings, no biases, a GELU MLP, GPT-2 initialisation, and `generate`. Plus the presets from a laptop smoke test to the paper's 350M.
- `coupled_qk.mqar`: The MQAR toy task of Zoology: a context of key-value pairs, then every key asked again; the model must answer each with its value. A fast, seeded, vectorised numpy generator.
- `coupled_qk.registry`: Runs, scales and artifacts as data: which runs each figure and table of the paper needs at each scale, each run named by one identity, and the paper's numbers.
- `coupled_qk.results`: What the artifact notebooks read: one row per run of an artifact, from the committed run summaries in `figures/<scale>/runs/`, and the runs' evaluation curves.
- `coupled_qk.runner`: `coupled-qk reproduce`: plan the runs of the requested artifacts, reuse every finished one, execute the rest through their experiment notebooks (one writer per run), then execute the artifact notebooks.
- `coupled_qk.settings`: Where data, runs and figures go, which device to use, and where offline copies of the paper's corpora live: one small file, `settings.ini`, read by one small function.
- `coupled_qk.stats`: The numbers that go with every comparison: n seeds, mean ± std, a paired t-test over seeds with its bootstrap interval, effect size and minimum detectable effect, Welch's t-test and Hedges' g as the unpaired check, a variance test for stability claims, Holm's correction across a table, a verdict rule for the paper's claims, and the tokens-to-target ratio of sample efficiency. All built on `scipy.stats`.
- `coupled_qk.tokens`: Tokenizers (GPT-2's exact BPE offline, a byte-level BPE trained on a corpus, raw bytes), token caches that are verified before use, and the batches the trainer draws from them.
- `coupled_qk.train`: The trainer: language modelling on a corpus (with exact resume after a crash, a guard against divergence, and data parallelism through torchrun), and MQAR with Zoology's learning-rate sweep."""

__version__ = "0.1.0"
