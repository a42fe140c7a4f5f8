"""Problems and datasets as the store keeps them and the API shows them.

A problem's tests are stored in the executor's own test format, so running them needs no
translation: stdin tests, call tests, and (for suites that only exist as a checking
program, such as parts of HumanEval's `check`) program tests, which run the solution
followed by the checking code.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from cobalt.shared.contracts.executor import CallTest, ProgramTest, StdinTest

__all__ = [
    "DatasetPublic",
    "DatasetsPublic",
    "PROGRAM_TEST_MARKER",
    "ProblemPublic",
    "ProblemRow",
    "ProgramTest",
    "StoredTest",
    "TestStyle",
]

PROGRAM_TEST_MARKER = "COBALT-CHECK-PASSED"
"""What a program test printed after its checks before the executor ran checks itself
(2026-11); kept for readers of old results. Nothing decides a verdict by it any more."""


class TestStyle(StrEnum):
    """How a problem's tests talk to a solution."""

    __test__ = False

    STDIN = "stdin"
    CALL = "call"


StoredTest = Annotated[StdinTest | CallTest | ProgramTest, Field(union_mode="left_to_right")]


class ProblemRow(BaseModel):
    """One problem in the project's own JSONL format (`cobalt data import --format jsonl`).

    The JSON Schema of this model is in docs/schemas/problem.schema.json.
    """

    model_config = ConfigDict(extra="forbid")

    external_id: str = Field(min_length=1, max_length=300)
    statement: str = Field(min_length=1)
    starter_code: str = ""
    test_style: TestStyle = TestStyle.STDIN
    fn_name: str | None = None
    public_tests: list[StoredTest] = Field(default_factory=list)
    hidden_tests: list[StoredTest] = Field(default_factory=list)
    difficulty: str | None = None
    source_metadata: dict[str, Any] = Field(default_factory=dict)


class ProblemPublic(ProblemRow):
    """A stored problem."""

    model_config = ConfigDict(extra="forbid", from_attributes=True)

    id: int
    dataset: str
    perturbation: dict[str, Any] | None = None


class DatasetPublic(BaseModel):
    """A stored dataset and how many problems it holds."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    name: str
    source: str
    variant: str
    parent: str | None = None
    provenance: dict[str, Any] = Field(default_factory=dict)
    problem_count: int = 0
    created_at: datetime


class DatasetsPublic(BaseModel):
    items: list[DatasetPublic]
    total: int
