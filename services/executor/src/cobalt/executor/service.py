"""The executor's service layer: admission, scheduling of tests onto sandboxes, judging.

Routes, the CLI and tests call `ExecutorService`; it knows nothing about HTTP. Blocking
sandbox work runs on a thread pool with one thread per slot, so the event loop only
schedules and never waits on a pipe.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, TypeVar

from pydantic import ValidationError

from cobalt.executor.admission import Admission
from cobalt.executor.compiled import (
    Build,
    BuildCache,
    capped_compilation,
    compile_error_result,
    compile_job,
    interpreted_build,
    read_build,
    run_job_fields,
)
from cobalt.executor.errors import (
    FileDescriptorsExhausted,
    LimitTooHigh,
    QueueTimeout,
    UnsupportedFeature,
)
from cobalt.executor.judge import judge, sandbox_error, skipped
from cobalt.executor.languages import (
    PYTHON,
    CompileLimits,
    check_language,
    find_language,
    language_details,
)
from cobalt.executor.metrics import ExecutorMetrics
from cobalt.executor.pool import SandboxPool
from cobalt.executor.preset_rules import refuse_unjudgeable
from cobalt.executor.presets import (
    HARNESS_CALL_NAME,
    HARNESSED,
    harnessed_program,
)
from cobalt.executor.program_memory import lcb_replay, request_bytes
from cobalt.executor.readiness import Readiness, ReadyState
from cobalt.executor.response_budget import ResponseBudget
from cobalt.executor.run_code_shapes import (
    as_run_code_response,
    compilation_as_sandboxfusion,
    unbuilt_as_sandboxfusion,
)
from cobalt.executor.sandbox import RawRun, SandboxJob
from cobalt.executor.settings import ExecutorSettings
from cobalt.executor.value_budget import sendable
from cobalt.executor.workfiles import FETCH_FILES_REFUSED, WorkFile, decode_files
from cobalt.shared.contracts import (
    BatchExecuteRequest,
    BatchExecuteResponse,
    Compare,
    ExecuteRequest,
    ExecuteResponse,
    ExecutorInfo,
    Limits,
    ProgramTest,
    RunCodeRequest,
    RunCodeResponse,
    StdinTest,
    TestCase,
    TestResult,
    Verdict,
)
from cobalt.shared.contracts.executor import (
    MAX_LIMIT_SETTINGS,
    Compilation,
    LimitAboveMaximum,
    MaxLimits,
    limits_above_maximum,
)
from cobalt.shared.errors import InvalidInput, Overloaded, first_validation_error
from cobalt.shared.version import __version__

__all__ = [
    "EXECUTOR_VERSION",
    "ExecutorService",
    "execute_response",
    "job_for_test",
]

logger = logging.getLogger(__name__)

Result = TypeVar("Result")

EXECUTOR_VERSION = f"cobalt-executor/{__version__}"
MIN_MEMORY_MB = 16
"""Smallest memory limit a test runs with (MiB of data beyond the interpreter)."""
LIMITS_BOUND = 65536
"""`Limits`' own bound on memory_mb and output_kb (a server may allow more in its settings)."""
CANARY = ExecuteRequest(
    code="print(sum(int(x) for x in input().split()))",
    tests=[StdinTest(stdin="20 22\n", expected_stdout="42")],
)


def job_for_test(
    test: TestCase,
    request: ExecuteRequest,
    wall_s: float,
    abandoned: threading.Event | None = None,
    build: Build | None = None,
) -> SandboxJob:
    """The sandbox job for one test. Expected values stay here, never in the sandbox.

    Under the `lcb` and `humaneval` presets the program runs inside the scorer's harness,
    and a call test calls the harness's entry point with the function's name first. A
    program test runs its check in a process of its own (`_check_harness.py`).
    """
    limits = request.limits
    harnessed = request.compare in HARNESSED and not isinstance(test, ProgramTest)
    mode = "stdin" if isinstance(test, StdinTest) else "call"
    code = request.code
    prior: tuple[bytes, ...] = ()
    if harnessed:
        code = harnessed_program(request.code, request.compare, mode)
    if harnessed and mode == "call" and request.compare is Compare.LCB:
        prior = lcb_replay(request).calls_before(test)
    common = {
        "code": code,
        "wall_s": wall_s,
        "cpu_s": min(limits.cpu_s or limits.wall_s, wall_s),
        "memory_mb": limits.memory_mb,
        "output_bytes": limits.output_kb * 1024,
        "abandoned": abandoned,
        "harnessed": harnessed,
    }
    if isinstance(test, StdinTest):
        # Lone surrogates (valid in JSON, not in UTF-8) pass through as their raw code units.
        stdin = test.stdin.encode("utf-8", "surrogatepass")
        if build is not None and build.toolchain is not None:
            common.update(run_job_fields(build.toolchain, build, limits.memory_mb))
            return SandboxJob(stdin=stdin, **common)  # type: ignore[arg-type]
        files = build.files if build is not None else ()
        return SandboxJob(mode="stdin", stdin=stdin, files=files, **common)  # type: ignore[arg-type]
    if isinstance(test, ProgramTest):
        check = test.check.encode("utf-8", "surrogatepass")
        return SandboxJob(
            mode="check",
            stdin=check,
            preset=request.compare.value,
            **common,  # type: ignore[arg-type]
        )
    return SandboxJob(
        mode="call",
        fn_name=HARNESS_CALL_NAME if harnessed else test.fn_name,
        args=[test.fn_name, *test.args] if harnessed else test.args,
        kwargs=test.kwargs,
        prior_calls=prior,
        **common,  # type: ignore[arg-type]
    )


class ExecutorService:
    """Runs execute requests on a `SandboxPool` with bounded queueing."""

    def __init__(
        self, *, settings: ExecutorSettings, pool: SandboxPool, metrics: ExecutorMetrics
    ) -> None:
        self.settings = settings
        self.pool = pool
        self.metrics = metrics
        self.builds = BuildCache(settings.build_cache_mb << 20)
        """Recent builds of compiled programs (compiled.BuildCache)."""
        self._threads = ThreadPoolExecutor(
            max_workers=len(pool.slots), thread_name_prefix="sandbox"
        )
        self.admission = Admission(
            max_tests=settings.max_pending_tests,
            max_bytes=settings.max_pending_bytes,
            slots=len(pool.slots),
        )
        admission = self.admission
        self.readiness = Readiness(
            interval_s=settings.readiness_interval_s,
            timeout_s=settings.readiness_timeout_s,
            busy=lambda: pool.busy >= len(pool.slots),
            slots_working=pool.slots_working,
        )
        metrics.slots.set(len(pool.slots))
        metrics.pending_tests.set_function(lambda: admission.tests)
        metrics.busy_slots.set_function(lambda: pool.busy)
        metrics.queue_depth.set_function(lambda: max(admission.tests - pool.busy, 0))
        metrics.sandbox_restarts.set_function(lambda: pool.restarts)

    def close(self) -> None:
        self._threads.shutdown(wait=False, cancel_futures=True)

    # --- admission -----------------------------------------------------------------

    def validate(self, request: ExecuteRequest) -> None:
        """Refuse limits above this executor's maxima, naming the setting to change.

        Raises:
            LimitTooHigh: a limit or the number of tests is above the maximum.
        """
        s = self.settings
        if len(request.tests) > s.max_tests_per_request:
            raise LimitTooHigh(
                f"tests is {len(request.tests)}, above this executor's maximum of "
                f"{s.max_tests_per_request} (raise COBALT_EXECUTOR_MAX_TESTS_PER_REQUEST on the "
                "executor to allow it)",
                detail={
                    "field": "tests",
                    "value": len(request.tests),
                    "maximum": s.max_tests_per_request,
                },
            )
        above = limits_above_maximum(request.limits, self.max_limits())
        if above:
            raise LimitTooHigh(above[0].message(), detail=above[0].detail())
        check_language(request, self.pool.toolchains)
        refuse_unjudgeable(request)

    def max_limits(self) -> MaxLimits:
        """The highest limits a request may ask for (the `COBALT_EXECUTOR_MAX_*` settings)."""
        s = self.settings
        return MaxLimits(
            wall_s=s.max_wall_s,
            cpu_s=s.max_wall_s,
            memory_mb=s.max_memory_mb,
            output_kb=s.max_output_kb,
            total_s=s.max_total_s,
        )

    # --- execution -----------------------------------------------------------------

    async def execute(self, request: ExecuteRequest) -> ExecuteResponse:
        """Run one program on its tests and judge each test.

        Raises:
            LimitTooHigh: the request asks for more than this executor allows.
            Overloaded: the queue is full.
            FileDescriptorsExhausted: the server ran out of file descriptors (retry).
        """
        self.validate(request)
        self._check_room()
        started = time.monotonic()
        response = await self._run_program(request, self.settings.max_response_bytes)
        self.metrics.request_seconds.labels(endpoint="execute").observe(time.monotonic() - started)
        return response

    async def execute_batch(self, batch: BatchExecuteRequest) -> BatchExecuteResponse:
        """Run many programs, admitted in pieces as room frees up; results in order.

        Raises:
            LimitTooHigh: a request asks for more than this executor allows.
            Overloaded: the queue is full.
            FileDescriptorsExhausted: the server ran out of file descriptors (retry).
        """
        for request in batch.requests:
            self.validate(request)
        self._check_room()
        started = time.monotonic()
        share = self.settings.max_response_bytes // len(batch.requests)
        results = await _all_or_none([self._run_program(r, share) for r in batch.requests])
        self.metrics.request_seconds.labels(endpoint="batch").observe(time.monotonic() - started)
        return BatchExecuteResponse(results=results)

    def _check_room(self) -> None:
        try:
            self.admission.check_room()
        except Overloaded:
            self.metrics.rejected.labels(reason="queue_full").inc()
            raise

    async def wait_for_room(self, hold_s: float) -> None:
        """Wait up to `hold_s` for the queue to have room, for clients that retry only a
        timeout (SandboxFusion's): past it, the queue-full refusal as a 504.

        Raises:
            QueueTimeout: the queue stayed full for `hold_s`.
        """
        if self.admission.has_room():
            return
        try:
            await asyncio.wait_for(self.admission.wait_for_room(), hold_s)
        except TimeoutError:
            try:
                self.admission.check_room()
            except Overloaded as full:
                self.metrics.rejected.labels(reason="queue_full").inc()
                raise QueueTimeout(
                    f"{full.message} (held {hold_s:g} s, COBALT_EXECUTOR_RUN_CODE_QUEUE_WAIT_S)",
                    retry_after_s=full.retry_after_s,
                ) from None

    async def _run_program(self, request: ExecuteRequest, response_bytes: int) -> ExecuteResponse:
        async with self.admission.admitted(len(request.tests), request_bytes(request)):
            shares = ResponseBudget(response_bytes, len(request.tests))
            return await self._run_admitted(request, shares)

    async def _run_admitted(
        self, request: ExecuteRequest, shares: ResponseBudget | None = None
    ) -> ExecuteResponse:
        budget = request.limits.total_s or self.settings.max_total_s
        deadline = time.monotonic() + budget
        # Set when the request fails or is cancelled (its client went away): tests not yet
        # started are skipped instead of running for nobody.
        abandoned = threading.Event()
        results: list[TestResult] = []
        try:
            build = await self._build(request, deadline, abandoned)
            if build is not None and build.failure is not None:
                results = self._unbuilt_results(request, build)
                if shares is not None:
                    results = [shares.take(result) for result in results]
            elif request.stop_on_first_failure:
                for test in request.tests:
                    if results and results[-1].verdict is not Verdict.ACCEPTED:
                        results.append(skipped("Not run: an earlier test failed."))
                        continue
                    results.append(
                        await self._run_test(test, request, deadline, abandoned, shares, build)
                    )
            else:
                results = await _all_or_none(
                    [
                        self._run_test(t, request, deadline, abandoned, shares, build)
                        for t in request.tests
                    ]
                )
        except BaseException:
            abandoned.set()
            raise
        return execute_response(
            results, capped_compilation(build.compilation if build else None, shares, len(results))
        )

    async def _build(
        self,
        request: ExecuteRequest,
        deadline: float,
        abandoned: threading.Event,
        files: tuple[WorkFile, ...] = (),
    ) -> Build | None:
        """A non-Python program's build (compiled once, for all its tests), or Python's
        files; None for a Python program without files."""
        toolchain = find_language(request.language, self.pool.toolchains)
        if toolchain is None:
            return Build(files=files) if files else None
        if not toolchain.language.compiled:
            return interpreted_build(toolchain, request.code, files)
        s = self.settings
        limits = CompileLimits(
            wall_s=max(0.1, min(s.compile_wall_s, deadline - time.monotonic())),
            memory_mb=s.compile_memory_mb,
            output_kb=s.compile_output_kb,
        )
        key = BuildCache.key(toolchain, request.code, files)
        cached = self.builds.get(key)
        if cached is not None:
            return cached
        job = replace(compile_job(toolchain, request.code, limits, files), abandoned=abandoned)
        loop = asyncio.get_running_loop()
        raw = await loop.run_in_executor(self._threads, self.pool.run, job)
        self.metrics.compile_seconds.observe(raw.wall_ms / 1000)
        build = read_build(toolchain, raw, job, limits, files)
        self.builds.put(key, build)
        return build

    def _unbuilt_results(self, request: ExecuteRequest, build: Build) -> list[TestResult]:
        """Every test's result when the program could not be built (reported once)."""
        if build.compilation is not None:
            result = compile_error_result(build.compilation, request.feedback_chars)
        else:
            result = build.failure or sandbox_error("The program could not be prepared.")
        self.metrics.verdicts.labels(verdict=result.verdict.value).inc(len(request.tests))
        return [result] * len(request.tests)

    async def _run_test(
        self,
        test: TestCase,
        request: ExecuteRequest,
        deadline: float,
        abandoned: threading.Event,
        shares: ResponseBudget | None = None,
        build: Build | None = None,
    ) -> TestResult:
        loop = asyncio.get_running_loop()
        result = await loop.run_in_executor(
            self._threads,
            self._run_test_blocking,
            test,
            request,
            deadline,
            abandoned,
            shares,
            build,
        )
        self.metrics.verdicts.labels(verdict=result.verdict.value).inc()
        self.readiness.observe(result.verdict)
        return result

    def _run_test_blocking(
        self,
        test: TestCase,
        request: ExecuteRequest,
        deadline: float,
        abandoned: threading.Event,
        shares: ResponseBudget | None,
        build: Build | None = None,
    ) -> TestResult:
        if abandoned.is_set():
            result = skipped("Not run: the request failed or was abandoned.")
        else:
            # The last line of defence: whatever goes wrong in running or judging one test
            # is that test's sandbox error; its siblings and other programs keep theirs.
            # Only running out of file descriptors fails the request, as a retryable 503.
            try:
                result = self._run_and_judge(test, request, deadline, abandoned, build)
            except FileDescriptorsExhausted:
                raise
            except Exception:
                logger.exception("running or judging a test failed; reporting a sandbox error")
                result = sandbox_error("The executor failed while running or judging this test.")
        # Made sendable and capped here, as each test ends: the response never holds more
        # than its budget nor anything its serializer would refuse.
        result = sendable(result)
        return result if shares is None else shares.take(result)

    def _run_and_judge(
        self,
        test: TestCase,
        request: ExecuteRequest,
        deadline: float,
        abandoned: threading.Event | None = None,
        build: Build | None = None,
    ) -> TestResult:
        remaining = deadline - time.monotonic()
        if remaining <= 0.05:
            return skipped("Not run: the request's total time budget (limits.total_s) ran out.")
        job = job_for_test(test, request, min(request.limits.wall_s, remaining), abandoned, build)
        began = time.monotonic()
        raw: RawRun = self.pool.run(job)
        elapsed = time.monotonic() - began
        self.metrics.test_seconds.observe(raw.wall_ms / 1000)
        self.metrics.overhead_seconds.observe(max(elapsed - raw.wall_ms / 1000, 0.0))
        return judge(
            test,
            job,
            raw,
            compare=request.compare,
            feedback_chars=request.feedback_chars,
            stream_chars=request.stream_chars,
        )

    # --- SandboxFusion compatibility ------------------------------------------------

    async def run_code(self, request: RunCodeRequest) -> RunCodeResponse:
        """SandboxFusion's `/run_code`: run a program once on `stdin`, no judging.

        Raises:
            UnsupportedFeature: a language this executor does not run, or `fetch_files`.
            InvalidInput: a file name outside the working directory, or files too big.
        """
        toolchain = find_language(request.language, self.pool.toolchains)
        if request.fetch_files:
            raise UnsupportedFeature(FETCH_FILES_REFUSED)
        reserved = (toolchain.language.source, *toolchain.language.artifacts) if toolchain else ()
        files = decode_files(request.files, self.settings.max_files_kb * 1024, reserved)
        self._check_sandboxfusion_timeouts(request)
        # SandboxFusion runs without a memory limit when given -1; we apply our maximum.
        # Tiny limits are raised to what an interpreter needs to start at all.
        memory_mb = (
            request.memory_limit_MB if request.memory_limit_MB > 0 else self.settings.max_memory_mb
        )
        output_kb = min(self.settings.max_output_kb, LIMITS_BOUND)
        try:
            probe = ExecuteRequest(
                code=request.code,
                language=request.language,
                tests=[StdinTest(stdin=request.stdin or "", expected_stdout="")],
                limits=Limits(
                    wall_s=request.run_timeout,
                    memory_mb=max(
                        MIN_MEMORY_MB, min(memory_mb, self.settings.max_memory_mb, LIMITS_BOUND)
                    ),
                    output_kb=output_kb,
                ),
                stream_chars=output_kb * 1024,
            )
        except ValidationError as exc:
            # RunCodeRequest bounds its fields as ExecuteRequest does; whatever slips
            # through is still the caller's input, never a server error.
            raise InvalidInput(first_validation_error(exc)) from exc
        self.validate(probe)
        await self.wait_for_room(self.settings.run_code_queue_wait_s)
        shares = ResponseBudget(self.settings.max_response_bytes, 1)
        abandoned = threading.Event()
        deadline = time.monotonic() + 3600
        try:
            async with self.admission.admitted(
                1, request_bytes(probe) + sum(len(f[1]) for f in files)
            ):
                build = await self._build(probe, deadline, abandoned, files)
                if build is not None and build.failure is not None:
                    return unbuilt_as_sandboxfusion(build)
                result = await self._run_test(
                    probe.tests[0], probe, deadline, abandoned, shares, build
                )
        except FileDescriptorsExhausted as exc:
            abandoned.set()
            # A 503 is a failed program to verl; a 504 it retries.
            raise QueueTimeout(exc.message, retry_after_s=exc.retry_after_s) from exc
        except BaseException:
            abandoned.set()  # the client went away: the running program is stopped
            raise
        response = as_run_code_response(result)
        if build is not None and build.compilation is not None:
            response.compile_result = compilation_as_sandboxfusion(build.compilation)
        return response

    def _check_sandboxfusion_timeouts(self, request: RunCodeRequest) -> None:
        """Refuse a `run_timeout` or `compile_timeout` above this executor's maximum
        wall time, naming the client's own field (not `limits.wall_s`).

        Raises:
            LimitTooHigh: either timeout is above COBALT_EXECUTOR_MAX_WALL_S.
        """
        maximum = self.settings.max_wall_s
        for field in ("run_timeout", "compile_timeout"):
            value = getattr(request, field)
            if value > maximum:
                above = LimitAboveMaximum(field, value, maximum, MAX_LIMIT_SETTINGS["wall_s"])
                raise LimitTooHigh(above.message(), detail=above.detail())

    # --- introspection --------------------------------------------------------------

    def info(self) -> ExecutorInfo:
        s = self.settings
        return ExecutorInfo(
            executor_version=EXECUTOR_VERSION,
            languages=[PYTHON, *(t.language.name for t in self.pool.toolchains)],
            language_details=language_details(self.pool.toolchains),
            compare_modes=[mode.value for mode in Compare],
            default_limits=Limits(),
            max_limits=self.max_limits(),
            slots=len(self.pool.slots),
            max_pending_tests=s.max_pending_tests,
            max_body_bytes=s.max_body_bytes,
            sandbox=("none (UNSAFE)" if s.unsafe_no_sandbox else "bubblewrap+seccomp+rlimits")
            + f"+{self.pool.cgroups.describe()}",
            python=self.pool.interpreter.version,
        )

    def readiness_state(self) -> tuple[ReadyState, str]:
        """Cached readiness (see readiness.py); costs no sandbox run."""
        return self.readiness.state()

    async def run_canary(self) -> ExecuteResponse:
        """The canary program through the normal path (admission, sandbox, judge)."""
        return await self.execute(CANARY)


def execute_response(
    results: list[TestResult], compilation: Compilation | None = None
) -> ExecuteResponse:
    """One program's response: its results in test order, their tally and its build."""
    passed = sum(r.verdict is Verdict.ACCEPTED for r in results)
    return ExecuteResponse(
        results=results,
        passed=passed,
        total=len(results),
        pass_rate=passed / len(results),
        executor_version=EXECUTOR_VERSION,
        compilation=compilation,
    )


async def _all_or_none(coroutines: list[Coroutine[Any, Any, Result]]) -> list[Result]:
    """Run concurrently; if one fails, cancel the rest (no work keeps running for a
    request already answered) and raise its error as is, not as an exception group."""
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(coroutine) for coroutine in coroutines]
    except BaseExceptionGroup as failures:
        raise failures.exceptions[0] from None
    return [task.result() for task in tasks]
