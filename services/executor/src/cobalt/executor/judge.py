"""Turn what the sandbox observed (`RawRun`) into a verdict and feedback for one test.

The rules, in order of precedence: infrastructure failure (sandbox_error), time, memory,
output size, then how the program ended, then the comparison. Exit status 0 alone never
means accepted: a stdin test also needs matching output, and a call test needs the
harness's record (tagged with the per-test nonce) holding a matching return value.
"""

from __future__ import annotations

import math
import signal
from dataclasses import dataclass
from typing import Any

from cobalt.executor.compare import outputs_match, render_typed, values_match
from cobalt.executor.presets import HARNESSED
from cobalt.executor.sandbox import RawRun, SandboxJob
from cobalt.executor.values import LargeInt, dumps_value, loads_returned
from cobalt.shared.contracts import (
    CallTest,
    Compare,
    ProgramTest,
    StdinTest,
    TestCase,
    TestResult,
    Verdict,
)
from cobalt.shared.contracts.executor import RETURNED_MAX_CHARS
from cobalt.shared.text import truncate_middle

__all__ = [
    "HarnessRecord",
    "judge",
    "parse_record",
    "printable",
    "sandbox_error",
    "signal_name",
    "skipped",
]

MEMORY_SIGNALS = {signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT, signal.SIGKILL}
RUNTIME_OOM = ("java.lang.OutOfMemoryError: Java heap space", "JavaScript heap out of memory")
"""How a runtime whose heap is capped at the test's memory limit says it reached it (a
program printing this itself turns its failure into another failure, no better)."""


@dataclass(frozen=True)
class HarnessRecord:
    """What the in-sandbox harness reported at the end of a test, nonce checked.

    Whether the harness *started* (so that untrusted code may have run) is not in here:
    the record pipe is open in the program's process, which can read and write it. The
    zygote tells the server directly (`RawRun.started`).
    """

    status: str | None = None
    info: dict[str, Any] | None = None
    value: str | None = None


def parse_record(data: bytes, nonce: str) -> HarnessRecord:
    """The last well-formed `<nonce> {json}` line of the harness channel, and the value
    after it; anything else the channel holds is ignored. Never raises."""
    prefix = f"{nonce} {{".encode()
    if not nonce:
        return HarnessRecord()
    if data.startswith(prefix):
        start = 0
    else:
        position = data.rfind(b"\n" + prefix)
        if position < 0:
            return HarnessRecord()
        start = position + 1
    line, _, value = data[start:].partition(b"\n")
    try:
        info = loads_returned(line[len(nonce) + 1 :])
    except ValueError:
        return HarnessRecord()
    if not isinstance(info, dict):
        return HarnessRecord()
    return HarnessRecord(
        status=str(info.get("status")), info=info, value=value.decode("utf-8", "replace")
    )


def signal_name(number: int) -> str:
    """A signal's name, for any number the kernel can deliver (real-time ones included)."""
    try:
        return signal.Signals(number).name
    except ValueError:
        if signal.SIGRTMIN <= number <= signal.SIGRTMAX:
            return f"SIGRTMIN+{number - signal.SIGRTMIN}"
        return f"signal {number}"


def printable(text: str) -> str:
    """`text` with lone surrogates replaced, so that it can be encoded as UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def _as_json_text(value: Any) -> str:
    try:
        return dumps_value(value)
    except (TypeError, ValueError):
        return repr(value)


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _is_memory_failure(raw: RawRun, record: HarnessRecord, job: SandboxJob, stderr: str) -> bool:
    if raw.memory_exceeded or record.status == "memory_error":
        return True
    if raw.exit_code not in (None, 0) and stderr.rstrip().endswith("MemoryError"):
        return True
    if raw.exit_code != 0 and any(marker in stderr[-4096:] for marker in RUNTIME_OOM):
        return True  # the JVM's or V8's heap limit (set to the test's memory limit)
    near_limit = raw.max_rss_kb >= 0.9 * job.memory_mb * 1024
    return raw.signal in MEMORY_SIGNALS and near_limit


def _is_cpu_timeout(raw: RawRun, job: SandboxJob) -> bool:
    # Judged on CPU time used, whatever the program did with SIGXCPU.
    if raw.cpu_exceeded or raw.signal == signal.SIGXCPU or raw.cpu_ms > job.cpu_s * 1000:
        return True
    return raw.signal == signal.SIGKILL and raw.cpu_ms >= job.cpu_s * 1000 * 0.95


def _crash_description(raw: RawRun, record: HarnessRecord) -> str:
    if raw.signal is not None:
        return f"killed by signal {raw.signal} ({signal_name(raw.signal)})"
    if record.status == "syntax_error":
        return "syntax error"
    return f"exit code {raw.exit_code}"


@dataclass
class _Outcome:
    verdict: Verdict
    detail: str = ""
    actual: str | None = None
    returned: Any = None
    """The value returned, as the result's `returned` (JSON, capped)."""
    check: dict[str, Any] | None = None
    """A program test's record: the failing line, the last call, the program's error."""


def _decide(
    test: TestCase,
    job: SandboxJob,
    raw: RawRun,
    compare: Compare,
    stdout: str,
    stderr: str,
) -> _Outcome:
    record = parse_record(raw.record, raw.nonce)
    if not raw.started:
        # No untrusted code ran, so nothing here is the program's fault, except a program
        # too big to even compile within its time limit.
        if raw.deadline_exceeded:
            return _Outcome(Verdict.TIME_LIMIT, f"time limit exceeded ({job.wall_s:g} s)")
        if raw.slot_died:
            return _Outcome(Verdict.SANDBOX_ERROR, "the sandbox failed before the program ran")
        return _Outcome(Verdict.SANDBOX_ERROR, "the test harness failed to start")
    if raw.memory_exceeded:
        return _Outcome(Verdict.MEMORY_LIMIT, f"memory limit exceeded ({job.memory_mb} MiB)")
    if raw.deadline_exceeded or _is_cpu_timeout(raw, job):
        return _Outcome(Verdict.TIME_LIMIT, f"time limit exceeded ({job.wall_s:g} s)")
    if raw.slot_died:
        return _Outcome(Verdict.RUNTIME_ERROR, "the program terminated its sandbox")
    if _is_memory_failure(raw, record, job, stderr):
        return _Outcome(Verdict.MEMORY_LIMIT, f"memory limit exceeded ({job.memory_mb} MiB)")
    if raw.output_exceeded:
        return _Outcome(Verdict.OUTPUT_LIMIT, f"output limit exceeded ({job.output_bytes} bytes)")
    if raw.exit_code != 0:
        return _Outcome(Verdict.RUNTIME_ERROR, _crash_description(raw, record))
    if isinstance(test, ProgramTest):
        return _decide_check(record)
    if isinstance(test, StdinTest):
        if compare in HARNESSED and record.status != "done":
            # The scorer's harness never finished (os._exit, a killed interpreter): both
            # official scorers then record no result, a failure.
            return _Outcome(Verdict.RUNTIME_ERROR, "the program ended before its harness did")
        if outputs_match(stdout, test.expected_stdout, compare):
            return _Outcome(Verdict.ACCEPTED)
        return _Outcome(Verdict.WRONG_ANSWER, actual=stdout)
    return _decide_call(test, record, compare)


def _decide_call(test: CallTest, record: HarnessRecord, compare: Compare) -> _Outcome:
    if record.status == "missing":
        return _Outcome(
            Verdict.RUNTIME_ERROR,
            f"no function {test.fn_name!r} and no class Solution with that method",
        )
    if record.status == "unserializable":
        kind = (record.info or {}).get("type", "?")
        return _Outcome(Verdict.WRONG_ANSWER, f"returned a {kind}, which is not a JSON value")
    if record.status != "returned" or record.value is None:
        return _Outcome(Verdict.RUNTIME_ERROR, "the program exited before returning a result")
    try:
        actual = loads_returned(record.value)
    except ValueError:
        return _Outcome(Verdict.WRONG_ANSWER, "the returned value could not be read as JSON")
    typed = compare in HARNESSED
    try:
        returned = _returned(actual, typed) if len(record.value) <= RETURNED_MAX_CHARS else None
        matched = values_match(actual, test.expected, compare)
        shown = render_typed(actual, _RENDER_BUDGET) if typed else record.value
    except Exception:  # the judge's failure on the program's data is the program's verdict
        return _Outcome(Verdict.WRONG_ANSWER, "the returned value could not be compared")
    if matched:
        return _Outcome(Verdict.ACCEPTED, actual=record.value, returned=returned)
    return _Outcome(Verdict.WRONG_ANSWER, actual=shown, returned=returned)


_RENDER_BUDGET = 1 << 16
"""Characters of a returned value rendered for feedback (then middle-truncated)."""


def _returned(value: Any, typed: bool) -> Any:
    """A returned value as plain JSON for `TestResult.returned` (its size is capped by the
    caller): tuples as lists, non-finite floats and values with no JSON form as text."""
    if isinstance(value, LargeInt):
        return value.text
    if isinstance(value, str):
        return printable(value)  # JSON allows lone surrogates, the response's UTF-8 does not
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, list):
        return [_returned(item, typed) for item in value]
    if isinstance(value, dict):
        if not typed:
            return {printable(key): _returned(item, typed) for key, item in value.items()}
        if set(value) == {"tuple"} and isinstance(value["tuple"], list):
            return [_returned(item, typed) for item in value["tuple"]]
        pairs = value.get("dict")
        if isinstance(pairs, list) and all(isinstance(p, list) and len(p) == 2 for p in pairs):
            keys = [p[0] for p in pairs]
            if all(isinstance(k, str) for k in keys) and len(set(keys)) == len(keys):
                return {printable(k): _returned(v, typed) for k, v in pairs}
        return printable(render_typed(value, RETURNED_MAX_CHARS))
    return value


_CHECK_OUTCOMES: dict[str, tuple[Verdict, str]] = {
    "check_failed": (Verdict.WRONG_ANSWER, "the check failed"),
    "check_error": (Verdict.WRONG_ANSWER, "the check raised {error}"),
    "unreadable": (Verdict.WRONG_ANSWER, "the program returned a value that could not be read"),
    "missing": (Verdict.RUNTIME_ERROR, "no function {name!r}"),
    "program_raised": (Verdict.RUNTIME_ERROR, "the program raised {error}"),
    "program_exited": (Verdict.RUNTIME_ERROR, "the program exited before its check finished"),
    "unsupported_argument": (
        Verdict.RUNTIME_ERROR,
        "the check passed the program a value that cannot cross processes ({error})",
    ),
}
"""How each record of the check harness (`_check_harness._verdict`) ends a program test."""


def _decide_check(record: HarnessRecord) -> _Outcome:
    """A program test's verdict: the check process's record alone decides it."""
    info = record.info or {}
    if record.status == "check_passed":
        return _Outcome(Verdict.ACCEPTED)
    known = _CHECK_OUTCOMES.get(str(record.status))
    if known is None:
        return _Outcome(Verdict.RUNTIME_ERROR, "the program ended before its check did")
    verdict, template = known
    fields = {"error": str(info.get("error", "an error"))[:200], "name": str(info.get("name"))}
    returned = info.get("returned")
    return _Outcome(
        verdict,
        template.format(**fields),
        returned=printable(returned) if isinstance(returned, str) else None,
        check=info,
    )


def _feedback(test: TestCase, outcome: _Outcome, stderr: str, limit: int) -> str:
    if outcome.verdict is Verdict.ACCEPTED:
        return "Passed."

    def cut(text: str) -> str:
        return truncate_middle(text, limit)

    if isinstance(test, ProgramTest):
        return _check_feedback(outcome, stderr, cut)
    if isinstance(test, StdinTest):
        parts = [f"Input:\n{cut(test.stdin)}"]
    else:
        call_args = [_as_json_text(a) for a in test.args]
        call_args += [f"{k}={_as_json_text(v)}" for k, v in test.kwargs.items()]
        parts = [f"Call:\n{cut(test.fn_name + '(' + ', '.join(call_args) + ')')}"]
    expected = test.expected_stdout if isinstance(test, StdinTest) else _as_json_text(test.expected)
    parts.append(f"Expected output:\n{cut(expected)}")
    if outcome.verdict is Verdict.WRONG_ANSWER:
        label = "Your output" if isinstance(test, StdinTest) else "Your return value"
        if outcome.actual is not None:
            parts.append(f"{label}:\n{cut(outcome.actual)}")
        if outcome.detail:
            parts.append(_sentence(outcome.detail))
    elif outcome.verdict is Verdict.RUNTIME_ERROR:
        parts.append(f"Error ({outcome.detail}):\n{cut(stderr.strip())}".rstrip(":\n"))
    elif outcome.detail:
        parts.append(_sentence(outcome.detail))
    return "\n".join(parts)


def _check_feedback(outcome: _Outcome, stderr: str, cut: Any) -> str:
    """A failed program test in the default preset's words: the check's failing line
    (`Failed check`), the call that led there and what it returned, or the error."""
    info = outcome.check or {}
    parts = []
    line = info.get("line")
    if isinstance(line, str) and line:
        parts.append(f"Failed check (line {info.get('lineno')}):\n{cut(line)}")
    call = info.get("call")
    if isinstance(call, str) and call:
        parts.append(f"Call:\n{cut(call)}")
    if outcome.verdict is Verdict.WRONG_ANSWER and isinstance(info.get("returned"), str):
        parts.append(f"Your return value:\n{cut(info['returned'])}")
    if outcome.verdict is Verdict.RUNTIME_ERROR:
        trace = info.get("traceback")
        details = trace if isinstance(trace, str) and outcome.check else stderr
        parts.append(f"Error ({outcome.detail}):\n{cut(details.strip())}".rstrip(":\n"))
    elif outcome.detail:
        parts.append(_sentence(outcome.detail))
    return "\n".join(parts)


def _sentence(detail: str) -> str:
    return detail[:1].upper() + detail[1:] + "."


def judge(
    test: TestCase,
    job: SandboxJob,
    raw: RawRun,
    *,
    compare: Compare,
    feedback_chars: int,
    stream_chars: int,
) -> TestResult:
    """Decide the verdict of one test and write the feedback a model will read.

    Args:
        test: The test as the caller sent it (expected values never left the server).
        job: What was sent to the sandbox (limits included).
        raw: What the sandbox observed.
        compare: The comparator for outputs and returned values.
        feedback_chars: Middle-truncation length of each feedback field.
        stream_chars: Cap on stdout and stderr returned to the caller.

    Returns:
        The test's result, with feedback text for a model.
    """
    stdout, stderr = _decode(raw.stdout), _decode(raw.stderr)
    outcome = _decide(test, job, raw, compare, stdout, stderr)
    return TestResult(
        verdict=outcome.verdict,
        exit_code=raw.exit_code,
        signal=raw.signal,
        stdout=truncate_middle(stdout, stream_chars),
        stderr=truncate_middle(stderr, stream_chars),
        wall_ms=round(raw.wall_ms, 3),
        cpu_ms=round(raw.cpu_ms, 3),
        max_rss_kb=raw.max_rss_kb,
        # Test data may hold lone surrogates (JSON allows them, UTF-8 does not).
        feedback=printable(_feedback(test, outcome, stderr, feedback_chars)),
        returned=outcome.returned,
    )


def sandbox_error(reason: str) -> TestResult:
    """The result of a test the executor failed to run or judge: retry or mask it."""
    return TestResult(verdict=Verdict.SANDBOX_ERROR, feedback=reason)


def skipped(reason: str) -> TestResult:
    """The result of a test that was not run (stop on first failure, time budget)."""
    return TestResult(verdict=Verdict.SKIPPED, feedback=reason)
