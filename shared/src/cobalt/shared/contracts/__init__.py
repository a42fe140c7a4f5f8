"""Pydantic models that are the contracts between services and with users.

The names below are imported from their modules on first use (PEP 562), not when the
package is: building every contract's pydantic schema costs a store-reading command such as
`cobalt run list` a tenth of its start-up, and each caller needs only a few of them.
`from cobalt.shared.contracts import Compare` loads `contracts.executor` alone.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

    from cobalt.shared.contracts.executor import (
        REFERENCE_WALL_S,
        BatchExecuteRequest,
        BatchExecuteResponse,
        CallTest,
        Compare,
        ExecuteRequest,
        ExecuteResponse,
        ExecutorInfo,
        Limits,
        RunCodeRequest,
        RunCodeResponse,
        RunCodeResult,
        StdinTest,
        TestCase,
        TestResult,
        Verdict,
        reference_limits,
    )
    from cobalt.shared.contracts.inference import (
        POLICY_VERSION_HEADER,
        LoadAdapterRequest,
        LoadWeightsRequest,
        LoadWeightsResponse,
        PolicyStatus,
    )
    from cobalt.shared.contracts.problems import (
        PROGRAM_TEST_MARKER,
        DatasetPublic,
        DatasetsPublic,
        ProblemPublic,
        ProblemRow,
        ProgramTest,
        StoredTest,
        TestStyle,
    )
    from cobalt.shared.contracts.statuses import (
        RunKind,
        RunStatus,
        TrainingGroupStatus,
        TrainingJobStatus,
        TrajectoryStatus,
    )

_MODULE_OF = {
    **dict.fromkeys(
        (
            "REFERENCE_WALL_S BatchExecuteRequest BatchExecuteResponse CallTest "
            "Compare ExecuteRequest ExecuteResponse ExecutorInfo Limits "
            "RunCodeRequest RunCodeResponse RunCodeResult StdinTest TestCase "
            "TestResult Verdict reference_limits"
        ).split(),
        "executor",
    ),
    **dict.fromkeys(
        (
            "POLICY_VERSION_HEADER LoadAdapterRequest LoadWeightsRequest "
            "LoadWeightsResponse PolicyStatus"
        ).split(),
        "inference",
    ),
    **dict.fromkeys(
        (
            "PROGRAM_TEST_MARKER DatasetPublic DatasetsPublic ProblemPublic "
            "ProblemRow ProgramTest StoredTest TestStyle"
        ).split(),
        "problems",
    ),
    **dict.fromkeys(
        "RunKind RunStatus TrainingGroupStatus TrainingJobStatus TrajectoryStatus".split(),
        "statuses",
    ),
}
"""Each exported name's module under cobalt.shared.contracts."""

__all__ = [
    "BatchExecuteRequest",
    "BatchExecuteResponse",
    "CallTest",
    "Compare",
    "DatasetPublic",
    "DatasetsPublic",
    "ExecuteRequest",
    "ExecuteResponse",
    "ExecutorInfo",
    "Limits",
    "LoadAdapterRequest",
    "LoadWeightsRequest",
    "LoadWeightsResponse",
    "POLICY_VERSION_HEADER",
    "PROGRAM_TEST_MARKER",
    "PolicyStatus",
    "ProblemPublic",
    "ProblemRow",
    "ProgramTest",
    "REFERENCE_WALL_S",
    "RunCodeRequest",
    "RunCodeResponse",
    "RunCodeResult",
    "RunKind",
    "RunStatus",
    "StdinTest",
    "StoredTest",
    "TestCase",
    "TestResult",
    "TestStyle",
    "TrainingGroupStatus",
    "TrainingJobStatus",
    "TrajectoryStatus",
    "Verdict",
    "reference_limits",
]


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
