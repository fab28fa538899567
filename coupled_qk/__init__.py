"""Coupled query-key dynamics for attention: a literate, reproducible companion to Gahtan & Bronstein (2026)

Modules:

- `coupled_qk.corpora`: Every text the experiments see comes through this module: the hub, local copies and the embedded corpora, prepared once per source (`coupled-qk data prepare NAME`), fingerprinted, pinned, and recorded in a manifest. Documents, splits and local readers are the `documents` chapter's; the embedded corpora and their pins the `embedded` chapter's.
- `coupled_qk.stats`: The numbers that go with every comparison: n seeds, mean ± std, a paired t-test over seeds with its bootstrap interval, effect size and minimum detectable effect, Welch's t-test and Hedges' g as the unpaired check, a variance test for stability claims, Holm's correction across a table, a verdict rule for the paper's claims, and the tokens-to-target ratio of sample efficiency. All built on `scipy.stats`."""

__version__ = "0.1.0"
