"""One way to fuzz a server from its own OpenAPI document (schemathesis), for every
service's API fuzz test: bounded, derandomized, each operation in both generation modes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import schemathesis
from hypothesis import HealthCheck, Phase, given, settings

__all__ = ["fuzz_operation"]


def fuzz_operation(
    operation: Any,
    mode: schemathesis.GenerationMode,
    base_url: str,
    checks: list[Callable[..., Any]],
    *,
    examples: int,
    timeout_s: float = 60,
) -> None:
    """Send `examples` generated requests of `mode` to `operation`; each answer must pass
    `checks` (raises the first failure; `Unsatisfiable` when nothing can be generated)."""

    @settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def answer_within_the_contract(case: schemathesis.Case) -> None:
        case.call_and_validate(base_url=base_url, checks=checks, timeout=timeout_s)

    answer_within_the_contract()
