"""Where a source checkout keeps its other environments.

`make setup` builds three environments beside the code: `.venv` (core), `.venv-inference`
(vLLM) and `.venv-trainer` (torch, verl), because their pins clash. A command that needs
another environment's interpreter (`cobalt trainer serve` from the core one, the inference
launcher, the demo) finds it here, unless a setting names it. Installed from wheels, outside
a checkout, these paths do not exist and the setting is required.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["CHECKOUT_ROOT", "checkout_python"]

# shared/src/cobalt/shared/checkout.py: four folders below the checkout's root.
CHECKOUT_ROOT = Path(__file__).resolve().parents[4]


def checkout_python(environment: str) -> Path:
    """The interpreter of `environment` (".venv-trainer", ...) in this checkout."""
    return CHECKOUT_ROOT / environment / "bin" / "python"
