"""Coupled query-key dynamics for attention: a literate, reproducible companion to Gahtan & Bronstein (2026)"""

__version__ = "0.1.0"
