"""ScaleBox's `/common_evaluate_batch`: one completion and all its tests in one request.

ScaleBox (a SandboxFusion fork used by verl recipes) judges a model's completion on a
batch of test cases in one call, the way the executor's `/v1/execute` does. Here its
request becomes one `ExecuteRequest` (code extracted from the completion's fenced block,
`stdin_stdout` cases as stdin tests under the `lines` preset, `function_call` cases as
call tests) and each `TestResult` becomes ScaleBox's per-test outcome (`passed` and an
`exec_info` in `/run_code`'s shape). Nothing here knows HTTP (`api/routes/scalebox.py`).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cobalt.executor.errors import UnsupportedFeature
from cobalt.executor.run_code_shapes import as_run_code_response
from cobalt.shared.contracts import (
    CallTest,
    Compare,
    ExecuteRequest,
    ExecuteResponse,
    Limits,
    RunCodeResponse,
    StdinTest,
    TestCase,
    Verdict,
)
from cobalt.shared.contracts.executor import (
    MAX_CODE_CHARS,
    MAX_LIMIT_SETTINGS,
    MAX_TESTS_PER_REQUEST,
    LimitAboveMaximum,
)
from cobalt.shared.errors import InvalidInput, LimitTooHigh, first_validation_error

__all__ = ["ScaleBoxRequest", "ScaleBoxResult", "extract_code", "to_execute_request", "to_result"]

LANGUAGE_TAGS = {"python": ("python", "python3", "py")}
"""Fence tags that count as the language's own, besides its name."""


class ScaleBoxTestCases(BaseModel):
    """`config.provided_data.test_cases`: parallel lists of inputs and outputs."""

    model_config = ConfigDict(extra="ignore")

    type: Literal["stdin_stdout", "function_call", "assert"] | None = None
    input: list[Any] = Field(min_length=1, max_length=MAX_TESTS_PER_REQUEST)
    output: list[Any] = Field(min_length=1, max_length=MAX_TESTS_PER_REQUEST)
    fn_name: str | None = None


class ScaleBoxProvidedData(BaseModel):
    model_config = ConfigDict(extra="ignore")

    test_cases: ScaleBoxTestCases


class ScaleBoxConfig(BaseModel):
    model_config = ConfigDict(extra="ignore")

    language: str = Field(max_length=64)
    compile_timeout: float = Field(default=10.0, ge=0, le=600)
    run_timeout: float = Field(default=10.0, gt=0, le=600, description="seconds per test case")
    provided_data: ScaleBoxProvidedData
    custom_extract_logic: str | None = None
    extra: dict[str, Any] = Field(default_factory=dict)


class ScaleBoxRequest(BaseModel):
    """ScaleBox's SubmitRequest as `/common_evaluate_batch` reads it."""

    model_config = ConfigDict(extra="ignore")

    id: int | str = 0
    completion: str = Field(max_length=MAX_CODE_CHARS)
    config: ScaleBoxConfig


class ScaleBoxTest(BaseModel):
    passed: bool
    exec_info: RunCodeResponse
    test_info: dict[str, Any]


class ScaleBoxResult(BaseModel):
    """ScaleBox's EvalResult."""

    id: int | str
    accepted: bool
    extracted_code: str
    tests: list[ScaleBoxTest]


_FENCE = re.compile(r"```([\w+#-]*)[^\n]*\n(.*?)```", re.DOTALL)


def extract_code(completion: str, language: str) -> str:
    """The last fenced block tagged with `language` (or untagged), else the last fenced
    block, else the whole completion."""
    blocks = _FENCE.findall(completion)
    if not blocks:
        return completion
    tags = LANGUAGE_TAGS.get(language, (language,))
    own = [code for tag, code in blocks if tag.lower() in tags or not tag]
    code: str = (own or [code for _, code in blocks])[-1]
    return code


def to_execute_request(
    request: ScaleBoxRequest, *, languages: list[str], max_wall_s: float
) -> ExecuteRequest:
    """The executor's request for a ScaleBox batch.

    Raises:
        UnsupportedFeature: a language this deployment lacks, `assert` cases, or custom
            extraction logic.
        LimitTooHigh: `config.run_timeout` or `config.compile_timeout` above the maximum.
        InvalidInput: inputs and outputs of different lengths, or a case out of range.
    """
    config = request.config
    language = "javascript" if config.language in ("nodejs", "js") else config.language
    if language not in languages:
        raise UnsupportedFeature(
            f"config.language {config.language!r} is not run by this executor "
            f"(it runs {', '.join(repr(x) for x in languages)})"
        )
    if config.custom_extract_logic:
        raise UnsupportedFeature("config.custom_extract_logic is not supported by this executor")
    cases = config.provided_data.test_cases
    kind = cases.type or ("function_call" if cases.fn_name else "stdin_stdout")
    if kind == "assert":
        raise UnsupportedFeature(
            "test_cases of type 'assert' are not supported here: send the asserts to "
            "/v1/execute as a program test ({'check': ...})"
        )
    if len(cases.input) != len(cases.output):
        raise InvalidInput(
            f"config.provided_data.test_cases has {len(cases.input)} inputs and "
            f"{len(cases.output)} outputs; they must pair up"
        )
    for field in ("run_timeout", "compile_timeout"):
        value = getattr(config, field)
        if value > max_wall_s:
            above = LimitAboveMaximum(
                f"config.{field}", value, max_wall_s, MAX_LIMIT_SETTINGS["wall_s"]
            )
            raise LimitTooHigh(above.message(), detail=above.detail())
    tests: list[TestCase] = []
    try:
        for given, expected in zip(cases.input, cases.output, strict=True):
            if kind == "function_call":
                args = given if isinstance(given, list) else [given]
                tests.append(CallTest(fn_name=cases.fn_name or "", args=args, expected=expected))
            else:
                tests.append(StdinTest(stdin=str(given), expected_stdout=str(expected)))
        # Validated from a mapping: `language` is any name the deployment lists.
        return ExecuteRequest.model_validate(
            {
                "code": extract_code(request.completion, language),
                "language": language,
                "tests": tests,
                "compare": Compare.LINES,
                "limits": Limits(wall_s=config.run_timeout),
                "stop_on_first_failure": not config.extra.get("run_all_cases", True),
            }
        )
    except ValidationError as exc:
        raise InvalidInput(first_validation_error(exc)) from exc


def to_result(
    request: ScaleBoxRequest, executed: ExecuteRequest, response: ExecuteResponse
) -> ScaleBoxResult:
    """ScaleBox's answer: `accepted` when every case passed, and each case's outcome."""
    cases = request.config.provided_data.test_cases
    tests = [
        ScaleBoxTest(
            passed=result.verdict is Verdict.ACCEPTED,
            exec_info=as_run_code_response(result),
            test_info={"input": given, "output": expected, "verdict": result.verdict.value},
        )
        for result, given, expected in zip(response.results, cases.input, cases.output, strict=True)
    ]
    return ScaleBoxResult(
        id=request.id,
        accepted=all(test.passed for test in tests),
        extracted_code=executed.code,
        tests=tests,
    )
