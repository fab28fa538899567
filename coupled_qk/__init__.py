"""Coupled query-key dynamics for attention: a literate, reproducible companion to Gahtan & Bronstein (2026)

Modules:

- `coupled_qk.decisions`: How a claim of the paper is decided: one pre-registered primary comparison, secondaries in a fixed sequence, the rest exploratory; the rule that turns a tested row's per-seed effects into a verdict, with the equivalence test (TOST) it uses, and the rule for success rates. statsmodels for the TOST and the Newcombe interval; scipy for the t distribution and Boschloo's test.
- `coupled_qk.power`: How many seeds a comparison needs and what it could have seen: the minimum detectable effect of a t-test over paired seeds (two- and one-sided), the seeds for a target MDE, the exact power of an equivalence test (TOST) on paired seeds, and the smallest seed-spread ratio an F-test detects. statsmodels' power function where it has one; our own code, with the reason, where it has none."""

__version__ = "0.1.0"
