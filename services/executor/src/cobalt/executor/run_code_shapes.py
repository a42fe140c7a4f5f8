"""Our results in SandboxFusion's shapes: what `/run_code` (and ScaleBox's `exec_info`)
answer for a run, a compilation, or a program that could not be built.
"""

from __future__ import annotations

from cobalt.executor.compiled import Build
from cobalt.shared.contracts.executor import (
    Compilation,
    RunCodeResponse,
    RunCodeResult,
    TestResult,
    Verdict,
)

__all__ = ["as_run_code_response", "compilation_as_sandboxfusion", "unbuilt_as_sandboxfusion"]


def compilation_as_sandboxfusion(compilation: Compilation) -> RunCodeResult:
    timed_out = "time limit" in compilation.reason
    return RunCodeResult(
        status="TimeLimitExceeded" if timed_out else "Finished",
        execution_time=compilation.wall_ms / 1000,
        return_code=0 if compilation.status == "ok" else (None if timed_out else 1),
        stdout="",
        stderr=compilation.output,
    )


def unbuilt_as_sandboxfusion(build: Build) -> RunCodeResponse:
    """SandboxFusion's answer for a program that did not compile (or a failed sandbox)."""
    if build.compilation is None:
        failure = build.failure
        return RunCodeResponse(
            status="SandboxError", message=failure.feedback if failure else "sandbox error"
        )
    return RunCodeResponse(
        status="Failed",
        message=build.compilation.reason,
        compile_result=compilation_as_sandboxfusion(build.compilation),
    )


def as_run_code_response(result: TestResult) -> RunCodeResponse:
    """A test's result as SandboxFusion reports a run (`/run_code`, ScaleBox's `exec_info`)."""
    if result.verdict is Verdict.SANDBOX_ERROR:
        return RunCodeResponse(status="SandboxError", message=result.feedback)
    timed_out = result.verdict is Verdict.TIME_LIMIT
    run = RunCodeResult(
        status="TimeLimitExceeded" if timed_out else "Finished",
        execution_time=result.wall_ms / 1000,
        # SandboxFusion reports no return code for a run it killed at the time limit.
        return_code=None
        if timed_out
        else (result.exit_code if result.exit_code is not None else -(result.signal or 0)),
        stdout=result.stdout,
        stderr=result.stderr,
    )
    ok = result.exit_code == 0 and result.verdict not in (
        Verdict.TIME_LIMIT,
        Verdict.MEMORY_LIMIT,
        Verdict.OUTPUT_LIMIT,
    )
    return RunCodeResponse(
        status="Success" if ok else "Failed",
        message="",
        run_result=run,
    )
