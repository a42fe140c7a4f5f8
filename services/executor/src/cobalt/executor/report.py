"""How `cobalt exec run` reads at the terminal: a verdict table, then what a person needs
to fix the program.

A failing test is shown with its input, the expected output and what the program printed
(or its error), as the executor's feedback already words them, each field cut to the
request's `feedback_chars`: the table alone said "Your output: -1" and left the reader to
find which input that was. A program that does not compile fails every test with the
same SyntaxError; that is one problem, so it is shown once, as a compile error, instead
of a runtime error per test.
"""

from __future__ import annotations

import re

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from cobalt.shared.contracts import ExecuteResponse, TestResult, Verdict

__all__ = ["FAILURES_SHOWN", "compile_error", "print_response"]

FAILURES_SHOWN = 3
"""Failing tests shown in full; the rest are counted (all of them: --json)."""

_COMPILE_ERROR = re.compile(r"^(SyntaxError|IndentationError|TabError)\b")

_VERDICT_STYLES = {
    Verdict.ACCEPTED: "green",
    Verdict.WRONG_ANSWER: "red",
    Verdict.RUNTIME_ERROR: "red",
    Verdict.TIME_LIMIT: "yellow",
    Verdict.MEMORY_LIMIT: "yellow",
    Verdict.OUTPUT_LIMIT: "yellow",
    Verdict.SANDBOX_ERROR: "magenta",
    Verdict.SKIPPED: "dim",
    Verdict.COMPILE_ERROR: "red",
}

_OUTCOME_HEADER = re.compile(r"^(Your output|Your return value|Error \(.*\)):$")


def compile_error(response: ExecuteResponse) -> str | None:
    """The compiler's message when the program never ran because it does not compile.

    That is: a compiled language's compilation failed (its messages, or why it was
    stopped), or every test that ran ended in a runtime error whose stderr ends with the
    same SyntaxError (or IndentationError, TabError); None otherwise.
    """
    if response.compilation is not None and response.compilation.status == "error":
        return response.compilation.output.strip() or response.compilation.reason
    ran = [r for r in response.results if r.verdict != Verdict.SKIPPED]
    if not ran or any(r.verdict != Verdict.RUNTIME_ERROR for r in ran):
        return None
    messages = {r.stderr.strip() for r in ran}
    if len(messages) != 1:
        return None
    (message,) = messages
    lines = message.splitlines()
    return message if lines and _COMPILE_ERROR.match(lines[-1]) else None


def feedback_summary(feedback: str) -> str:
    """The line of a test's feedback that says what went wrong, for a one-row table.

    Feedback is sections ("Input:", "Expected output:", then "Your output:" or
    "Error (...):") or ends in a sentence (time limit, ...); the outcome section's header
    and its last line say the most (the wrong output, or the exception of a traceback).
    """
    lines = [line for line in feedback.strip().splitlines() if line.strip()]
    if not lines or lines == ["Passed."]:
        return ""
    headers = [i for i, line in enumerate(lines) if _OUTCOME_HEADER.match(line)]
    last = headers[-1] if headers else -1
    if last < 0 or last == len(lines) - 1:
        return lines[-1]
    return f"{lines[last]} {lines[-1]}"


def _table(response: ExecuteResponse) -> Table:
    table = Table(title=response.executor_version, title_justify="left")
    table.add_column("#", justify="right")
    table.add_column("verdict")
    table.add_column("wall ms", justify="right")
    table.add_column("cpu ms", justify="right")
    table.add_column("feedback", overflow="fold")
    for number, result in enumerate(response.results, start=1):
        table.add_row(
            str(number),
            Text(result.verdict.value, style=_VERDICT_STYLES.get(result.verdict, "")),
            f"{result.wall_ms:.0f}",
            f"{result.cpu_ms:.0f}",
            Text(feedback_summary(result.feedback)),
        )
    return table


def _failure(number: int, result: TestResult) -> Panel:
    """One failing test in full: its feedback's sections, headers in bold."""
    body = Text()
    for line in result.feedback.strip().splitlines():
        header = line.endswith(":") and (
            line in ("Input:", "Call:", "Expected output:") or _OUTCOME_HEADER.match(line)
        )
        body.append(line + "\n", style="bold" if header else "")
    title = Text(f"test {number}: {result.verdict.value}", style=_VERDICT_STYLES[result.verdict])
    body.rstrip()
    return Panel(body if body.plain else Text("(no feedback)"), title=title, title_align="left")


def print_response(response: ExecuteResponse, console: Console | None = None) -> None:
    """The verdicts, then the first failing tests in full (or the compile error, once)."""
    console = console or Console(highlight=False)
    summary = f"passed {response.passed}/{response.total}"
    style = "green" if response.passed == response.total else "red"
    message = compile_error(response)
    if message is not None:
        console.print(
            Panel(
                Text(message),
                title=Text("compile error: the program never ran", style="red"),
                title_align="left",
            )
        )
        console.print(Text(f"{summary} (every test failed on this compile error)", style=style))
        return
    console.print(_table(response))
    failing = [(n, r) for n, r in enumerate(response.results, start=1) if _shown(r)]
    if failing:
        console.print(Group(*(_failure(n, r) for n, r in failing[:FAILURES_SHOWN])))
        if len(failing) > FAILURES_SHOWN:
            more = len(failing) - FAILURES_SHOWN
            console.print(Text(f"... and {more} more failing test(s); --json shows every one."))
    console.print(Text(summary, style=style))


def _shown(result: TestResult) -> bool:
    return result.verdict not in (Verdict.ACCEPTED, Verdict.SKIPPED)
