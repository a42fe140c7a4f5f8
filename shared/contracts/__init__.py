"""Pydantic models that are the contracts between services and with users."""

from cobalt.shared.contracts.executor import (
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
)

__all__ = [
    "BatchExecuteRequest",
    "BatchExecuteResponse",
    "CallTest",
    "Compare",
    "ExecuteRequest",
    "ExecuteResponse",
    "ExecutorInfo",
    "Limits",
    "RunCodeRequest",
    "RunCodeResponse",
    "RunCodeResult",
    "StdinTest",
    "TestCase",
    "TestResult",
    "Verdict",
]
