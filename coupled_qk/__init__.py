"""Coupled query-key dynamics for attention: a literate, reproducible companion to Gahtan & Bronstein (2026)

Modules:

- `coupled_qk.settings`: Where data, runs and figures go, which device to use, and where offline copies of the paper's corpora live: one small file, `settings.ini`, read by one small function."""

__version__ = "0.1.0"
