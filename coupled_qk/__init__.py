"""Coupled query-key dynamics for attention: a literate, reproducible companion to Gahtan & Bronstein (2026)

Modules:

- `coupled_qk.comparisons`: The numbers that go with every comparison of two variants over seeds: n, mean ± std, the paired t-test with its intervals, Welch's test and Hedges' g as the unpaired check, variance tests for stability claims, Holm's correction across a table, and the paired endpoints of special runs (steps to a threshold, McNemar on the same examples, a document bootstrap). Built on `scipy.stats` and `statsmodels`.
- `coupled_qk.corpora`: Every text the experiments see comes through this module: the hub, local copies and the embedded corpora, prepared once per source (`coupled-qk data prepare NAME`), fingerprinted, pinned, and recorded in a manifest. Documents, splits and local readers are the `documents` chapter's; the embedded corpora and their pins the `embedded` chapter's.
- `coupled_qk.decisions`: How a claim of the paper is decided: one pre-registered primary comparison, secondaries in a fixed sequence, the rest exploratory; the rule that turns a tested row's per-seed effects into a verdict, with the equivalence test (TOST) it uses, and the rule for success rates. statsmodels for the TOST and the Newcombe interval; scipy for the t distribution and Boschloo's test.
- `coupled_qk.power`: How many seeds a comparison needs and what it could have seen: the minimum detectable effect of a t-test over paired seeds (two- and one-sided), the seeds for a target MDE, the exact power of an equivalence test (TOST) on paired seeds, and the smallest seed-spread ratio an F-test detects. statsmodels' power function where it has one; our own code, with the reason, where it has none."""

__version__ = "0.1.0"
