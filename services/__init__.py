"""Cobalt: contextual-bandit learning for multi-turn code generation.

The `cobalt` package is the repository's `services/` folder: one subpackage per service
(`cobalt.executor`, later `cobalt.inference`, `cobalt.trainer`, `cobalt.orchestrator`),
plus `cobalt.shared` (the repository's `shared/` folder) for what several services need.
"""

__all__ = ["__version__"]

__version__ = "0.1.0"
