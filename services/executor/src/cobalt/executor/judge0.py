"""Judge0's submission API over the executor's service: translation and pending results.

Judge0 runs one program on one stdin, compares its output with `expected_output` when
one is given, and reports a numeric status. Here a submission becomes one
`ExecuteRequest` with one stdin test under the `lines` preset (Judge0 compares lines
with trailing whitespace stripped), and its `TestResult` becomes Judge0's status and
fields. Submissions that are not waited for (`wait=false`, what the `judge0` SDK sends)
are run in the background and kept in a bounded in-memory store (`SubmissionStore`)
until their result is read or expires. Nothing here knows HTTP; the routes are
`api/routes/judge0.py`.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import math
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cobalt.executor.errors import FileDescriptorsExhausted, UnsupportedFeature
from cobalt.shared.contracts import (
    Compare,
    ExecuteRequest,
    Limits,
    StdinTest,
    TestResult,
    Verdict,
)
from cobalt.shared.contracts.executor import MAX_LIMIT_SETTINGS, LimitAboveMaximum, MaxLimits
from cobalt.shared.errors import (
    InvalidInput,
    LimitTooHigh,
    NotFound,
    Overloaded,
    first_validation_error,
)

__all__ = [
    "DEFAULT_FIELDS",
    "JUDGE0_LANGUAGES",
    "JUDGE0_VERSION",
    "MAX_BATCH_SUBMISSIONS",
    "STATUSES",
    "Decoded",
    "Judge0Batch",
    "Judge0Language",
    "Judge0Submission",
    "SubmissionStore",
    "SubmissionsFull",
    "decode_submission",
    "judge0_result",
    "offered_languages",
    "run_when_room",
    "status_of",
]

logger = logging.getLogger(__name__)

JUDGE0_VERSION = "1.13.1"
"""The Judge0 version `/about` reports: the `judge0` SDK resolves a language alias
(`LanguageAlias.PYTHON`) to an id through its table for this version."""
MAX_BATCH_SUBMISSIONS = 20
"""Submissions in one `/submissions/batch` call (Judge0's default)."""


@dataclass(frozen=True)
class Judge0Language:
    """A Judge0 language id and the executor's language that runs it."""

    id: int
    name: str
    language: str
    """The executor's name (`GET /v1/info`'s `languages`)."""
    source_file: str


JUDGE0_LANGUAGES: tuple[Judge0Language, ...] = (
    Judge0Language(71, "Python 3", "python", "script.py"),
    Judge0Language(50, "C (GCC)", "c", "main.c"),
    Judge0Language(54, "C++ (GCC)", "cpp", "main.cpp"),
    Judge0Language(52, "C++ (GCC, the SDK's LanguageAlias.CPP)", "cpp", "main.cpp"),
    Judge0Language(62, "Java (OpenJDK)", "java", "Main.java"),
    Judge0Language(63, "JavaScript (Node.js)", "nodejs", "script.js"),
    Judge0Language(60, "Go", "go", "main.go"),
    Judge0Language(73, "Rust", "rust", "main.rs"),
)
"""The one table from Judge0 CE 1.13.1's language ids to the executor's languages (the
ids the `judge0` SDK's aliases resolve to). A language the deployment does not run
(`ExecutorInfo.languages`) is neither listed nor accepted."""

STATUSES: dict[int, str] = {
    1: "In Queue",
    2: "Processing",
    3: "Accepted",
    4: "Wrong Answer",
    5: "Time Limit Exceeded",
    6: "Compilation Error",
    7: "Runtime Error (SIGSEGV)",
    8: "Runtime Error (SIGXFSZ)",
    9: "Runtime Error (SIGFPE)",
    10: "Runtime Error (SIGABRT)",
    11: "Runtime Error (NZEC)",
    12: "Runtime Error (Other)",
    13: "Internal Error",
    14: "Exec Format Error",
}
IN_QUEUE, PROCESSING, ACCEPTED, WRONG_ANSWER, TIME_LIMIT, COMPILATION_ERROR = 1, 2, 3, 4, 5, 6
RUNTIME_NZEC, RUNTIME_OTHER, INTERNAL_ERROR = 11, 12, 13
_SIGNAL_STATUSES = {11: 7, 25: 8, 8: 9, 6: 10}  # SIGSEGV, SIGXFSZ, SIGFPE, SIGABRT

UNSUPPORTED_FIELDS = (
    "additional_files",
    "compiler_options",
    "command_line_arguments",
    "callback_url",
)


class Judge0Submission(BaseModel):
    """A Judge0 submission as its API takes it; fields this executor does not use
    (stack_limit, max_processes_and_or_threads, the per-process switches, max_file_size,
    cpu_extra_time) are accepted and ignored."""

    model_config = ConfigDict(extra="ignore")

    source_code: str = Field(max_length=8 << 20)
    language_id: int
    stdin: str | None = Field(default=None, max_length=24 << 20)
    expected_output: str | None = Field(default=None, max_length=24 << 20)
    cpu_time_limit: float | None = Field(default=None, gt=0)
    wall_time_limit: float | None = Field(default=None, gt=0)
    memory_limit: float | None = Field(default=None, gt=0, description="KB")
    number_of_runs: int | None = None
    redirect_stderr_to_stdout: bool | None = None
    enable_network: bool | None = None
    additional_files: str | None = None
    compiler_options: str | None = None
    command_line_arguments: str | None = None
    callback_url: str | None = None


class Judge0Batch(BaseModel):
    """`POST /submissions/batch`'s body."""

    submissions: list[Judge0Submission] = Field(min_length=1, max_length=MAX_BATCH_SUBMISSIONS)


@dataclass
class Decoded:
    """A submission ready to run, and what its result must echo back."""

    request: ExecuteRequest
    submission: Judge0Submission
    """With its text fields decoded from base64."""
    language: Judge0Language


def _text(value: str | None, name: str, base64_encoded: bool) -> str | None:
    if value is None or not base64_encoded:
        return value
    try:
        raw = base64.b64decode(value.replace("\n", "").replace("\r", ""), validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput(
            f"{name} is not valid base64 (the request says base64_encoded=true)"
        ) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput(f"{name} is not UTF-8 text once decoded from base64") from None


def decode_submission(
    submission: Judge0Submission,
    *,
    base64_encoded: bool,
    languages: list[str],
    maximum: MaxLimits,
) -> Decoded:
    """The executor's request for a Judge0 submission.

    Args:
        languages: The languages this deployment runs (`ExecutorInfo.languages`).
        maximum: The executor's maximum limits.

    Raises:
        InvalidInput: not base64 where it should be, or a field out of range.
        UnsupportedFeature: a language this deployment lacks, or a feature it lacks.
        LimitTooHigh: a limit above the executor's maximum, named by its Judge0 field.
    """
    language = next(
        (
            known
            for known in JUDGE0_LANGUAGES
            if known.id == submission.language_id and known.language in languages
        ),
        None,
    )
    if language is None:
        offered = ", ".join(f"{x.id} ({x.name})" for x in offered_languages(languages))
        raise UnsupportedFeature(
            f"language_id {submission.language_id} is not run by this executor; "
            f"GET /languages lists what it runs: {offered}"
        )
    for name in UNSUPPORTED_FIELDS:
        if getattr(submission, name):
            raise UnsupportedFeature(f"{name} is not supported by this executor")
    if submission.enable_network:
        raise UnsupportedFeature("enable_network: the sandbox has no network")
    if submission.redirect_stderr_to_stdout:
        raise UnsupportedFeature("redirect_stderr_to_stdout is not supported by this executor")
    if submission.number_of_runs not in (None, 1):
        raise UnsupportedFeature("number_of_runs other than 1 is not supported by this executor")
    decoded = submission.model_copy(
        update={
            name: _text(getattr(submission, name), name, base64_encoded)
            for name in ("source_code", "stdin", "expected_output")
        }
    )
    _check_limits(decoded, maximum)
    default = Limits()
    cpu = decoded.cpu_time_limit
    wall = decoded.wall_time_limit or max(cpu or 0.0, default.wall_s)
    memory_mb = max(16, math.ceil(decoded.memory_limit / 1024)) if decoded.memory_limit else None
    try:
        # Validated from a mapping: `language` is any name the deployment lists.
        request = ExecuteRequest.model_validate(
            {
                "code": decoded.source_code,
                "language": language.language,
                "tests": [
                    StdinTest(
                        stdin=decoded.stdin or "", expected_stdout=decoded.expected_output or ""
                    )
                ],
                "compare": Compare.LINES,
                "limits": Limits(
                    wall_s=wall,
                    cpu_s=cpu,
                    memory_mb=memory_mb or default.memory_mb,
                    output_kb=default.output_kb,
                ),
                "stream_chars": default.output_kb * 1024,
                # A compile error's messages come back in the test's stderr, cut to this.
                "feedback_chars": 100_000,
            }
        )
    except ValidationError as exc:
        raise InvalidInput(first_validation_error(exc)) from exc
    return Decoded(request=request, submission=decoded, language=language)


def _check_limits(submission: Judge0Submission, maximum: MaxLimits) -> None:
    asked = [
        ("cpu_time_limit", submission.cpu_time_limit, maximum.wall_s, "wall_s"),
        ("wall_time_limit", submission.wall_time_limit, maximum.wall_s, "wall_s"),
        ("memory_limit", submission.memory_limit, maximum.memory_mb * 1024, "memory_mb"),
    ]
    for name, value, highest, limit in asked:
        if value is not None and value > highest:
            above = LimitAboveMaximum(name, value, highest, MAX_LIMIT_SETTINGS[limit])
            raise LimitTooHigh(above.message(), detail=above.detail())


def offered_languages(languages: list[str]) -> list[Judge0Language]:
    """The Judge0 languages this deployment runs, in table order."""
    return [known for known in JUDGE0_LANGUAGES if known.language in languages]


# --- results --------------------------------------------------------------------------


def status_of(result: TestResult, has_expected: bool) -> tuple[int, str | None]:
    """Judge0's status id for a test's verdict, and the `message` to go with it."""
    verdict = result.verdict
    if verdict is Verdict.ACCEPTED:
        return ACCEPTED, None
    if verdict is Verdict.WRONG_ANSWER:
        # Without an expected output Judge0 judges only the run (it exited 0 in its limits).
        return (WRONG_ANSWER if has_expected else ACCEPTED), None
    if verdict is Verdict.TIME_LIMIT:
        return TIME_LIMIT, "Time limit exceeded"
    if verdict.value == "compile_error":
        return COMPILATION_ERROR, None
    if verdict is Verdict.MEMORY_LIMIT:
        return RUNTIME_OTHER, "Memory limit exceeded"
    if verdict is Verdict.OUTPUT_LIMIT:
        return RUNTIME_OTHER, "Output limit exceeded"
    if verdict is Verdict.RUNTIME_ERROR:
        if result.signal:
            return _SIGNAL_STATUSES.get(result.signal, RUNTIME_OTHER), f"signal {result.signal}"
        return RUNTIME_NZEC, f"Exited with error status {result.exit_code}"
    return INTERNAL_ERROR, result.feedback or verdict.value


def _timestamp(moment: datetime) -> str:
    # Judge0's own format, which the SDK parses with "%Y-%m-%dT%H:%M:%S.%fZ".
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _encode(text: str | None, base64_encoded: bool) -> str | None:
    if text is None or not base64_encoded:
        return text
    return base64.b64encode(text.encode("utf-8", "surrogatepass")).decode("ascii")


@dataclass
class Entry:
    """One stored submission: queued, running, or finished with its result."""

    token: str
    decoded: Decoded
    created_at: datetime
    status: int = IN_QUEUE
    result: TestResult | None = None
    message: str | None = None
    finished_at: datetime | None = None
    expires: float = math.inf
    task: asyncio.Task[None] | None = field(default=None, repr=False)


DEFAULT_FIELDS = (
    "token",
    "time",
    "memory",
    "stdout",
    "stderr",
    "compile_output",
    "message",
    "status",
)
"""What Judge0 returns when a request names no `fields`."""


def judge0_result(entry: Entry, *, base64_encoded: bool, fields: str | None) -> dict[str, Any]:
    """The submission as Judge0 answers it, with `fields` (comma-separated, `*` for all)."""
    submission = entry.decoded.submission
    result = entry.result
    compile_failed = entry.status == COMPILATION_ERROR
    everything: dict[str, Any] = {
        "token": entry.token,
        "source_code": _encode(submission.source_code, base64_encoded),
        "language_id": submission.language_id,
        "language": {"id": entry.decoded.language.id, "name": entry.decoded.language.name},
        "stdin": _encode(submission.stdin, base64_encoded),
        "expected_output": _encode(submission.expected_output, base64_encoded),
        "stdout": None,
        "stderr": None,
        "compile_output": None,
        "message": entry.message,
        "exit_code": None,
        "exit_signal": None,
        "status": {"id": entry.status, "description": STATUSES[entry.status]},
        "status_id": entry.status,
        "created_at": _timestamp(entry.created_at),
        "finished_at": _timestamp(entry.finished_at) if entry.finished_at else None,
        "time": None,
        "wall_time": None,
        "memory": None,
        "cpu_time_limit": entry.decoded.request.limits.cpu_s,
        "wall_time_limit": entry.decoded.request.limits.wall_s,
        "memory_limit": entry.decoded.request.limits.memory_mb * 1024,
        "number_of_runs": 1,
    }
    if result is not None:
        everything.update(
            stdout=None if compile_failed else _encode(result.stdout, base64_encoded),
            stderr=None if compile_failed else _encode(result.stderr, base64_encoded),
            compile_output=_encode(result.stderr, base64_encoded) if compile_failed else None,
            exit_code=result.exit_code,
            exit_signal=result.signal,
            time=f"{result.cpu_ms / 1000:.3f}",
            wall_time=f"{result.wall_ms / 1000:.3f}",
            memory=result.max_rss_kb,
        )
    if fields is not None and fields.strip() == "*":
        return everything
    wanted = DEFAULT_FIELDS if fields is None else [f.strip() for f in fields.split(",")]
    return {name: everything[name] for name in wanted if name in everything}


# --- the store of submissions ------------------------------------------------------------


class SubmissionsFull(Overloaded):
    """The store of submissions is full: retry after Retry-After (Judge0 answers a full
    queue with 503 too)."""

    status_code = 503
    error_type = "submissions_full"


Run = Callable[[ExecuteRequest], Awaitable[TestResult]]
"""Runs one submission's request (waiting for room in the executor's queue)."""


class SubmissionStore:
    """Submissions by token, bounded in count; a finished one is kept `ttl_s` seconds.

    Every submission counts until it expires, queued, running or finished: a full store
    refuses new ones (`SubmissionsFull`) rather than drop results nobody has read yet.
    Memory is bounded by `max_submissions` times a submission's size (its source, stdin
    and expected output as sent, its stdout and stderr capped at `Limits.output_kb`).
    """

    def __init__(self, *, max_submissions: int, ttl_s: float, run: Run) -> None:
        self.max_submissions = max_submissions
        self.ttl_s = ttl_s
        self._run = run
        self._entries: OrderedDict[str, Entry] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def _sweep(self) -> None:
        now = time.monotonic()
        for token in [t for t, e in self._entries.items() if e.expires <= now]:
            del self._entries[token]

    def _make_room(self, count: int) -> None:
        self._sweep()
        if len(self._entries) + count <= self.max_submissions:
            return
        finished = [e.expires for e in self._entries.values() if e.expires < math.inf]
        wait_s = min(finished) - time.monotonic() if finished else 1.0
        raise SubmissionsFull(
            f"this executor holds {len(self._entries)} submissions, its maximum "
            f"(COBALT_EXECUTOR_JUDGE0_MAX_SUBMISSIONS); read the finished ones or retry later",
            retry_after_s=max(1.0, wait_s),
        )

    def submit(self, batch: list[Decoded]) -> list[Entry]:
        """Store `batch` and start running each in the background.

        Raises:
            SubmissionsFull: there is no room for the whole batch.
        """
        self._make_room(len(batch))
        entries = []
        for decoded in batch:
            entry = Entry(token=str(uuid.uuid4()), decoded=decoded, created_at=datetime.now(UTC))
            self._entries[entry.token] = entry
            entry.task = asyncio.create_task(self._finish(entry))
            entries.append(entry)
        return entries

    async def run_now(self, decoded: Decoded) -> Entry:
        """Store one submission and wait for its result (`wait=true`).

        Raises:
            SubmissionsFull: there is no room for it.
        """
        (entry,) = self.submit([decoded])
        assert entry.task is not None
        await asyncio.shield(entry.task)
        return entry

    async def _finish(self, entry: Entry) -> None:
        try:
            entry.status = PROCESSING
            entry.result = await self._run(entry.decoded.request)
            has_expected = entry.decoded.submission.expected_output is not None
            entry.status, entry.message = status_of(entry.result, has_expected)
        except asyncio.CancelledError:
            entry.status, entry.message = INTERNAL_ERROR, "the executor shut down"
            raise
        except Exception:
            logger.exception("running a Judge0 submission failed")
            entry.status, entry.message = INTERNAL_ERROR, "the executor failed to run it"
        finally:
            entry.finished_at = datetime.now(UTC)
            entry.expires = time.monotonic() + self.ttl_s

    def get(self, token: str) -> Entry:
        """The submission of `token`.

        Raises:
            NotFound: no such submission, or its result expired.
        """
        self._sweep()
        entry = self._entries.get(token)
        if entry is None:
            raise NotFound(
                f"no submission {token[:64]!r}: never made, or finished more than "
                f"{self.ttl_s:g} s ago (COBALT_EXECUTOR_JUDGE0_RESULT_TTL_S)"
            )
        return entry

    def close(self) -> None:
        """Cancel the submissions still running (at shutdown)."""
        for entry in self._entries.values():
            if entry.task is not None and not entry.task.done():
                entry.task.cancel()


async def run_when_room(
    execute: Callable[[ExecuteRequest], Awaitable[Any]],
    wait_for_room: Callable[[], Awaitable[None]],
    request: ExecuteRequest,
) -> TestResult:
    """Run `request` (one test) as soon as the executor's queue takes it: a stored
    submission waits for room instead of failing on a full queue."""
    while True:
        await wait_for_room()
        try:
            response = await execute(request)
        except Overloaded:
            continue  # another request took the room first
        except FileDescriptorsExhausted as exc:
            await asyncio.sleep(exc.retry_after_s)
            continue
        result: TestResult = response.results[0]
        return result
