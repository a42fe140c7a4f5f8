"""Request seeds: one per place, the same in every process, within what servers read."""

from __future__ import annotations

import os
import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st

from cobalt.orchestrator.rollouts.request_seeds import SEED_BITS, request_seed

places = st.tuples(st.text(max_size=30), st.integers(0, 64), st.integers(0, 8))


@given(st.integers(-(2**63), 2**63 - 1), places)
def test_a_seed_is_within_31_bits_and_changes_with_each_part(
    seed: int, place: tuple[str, int, int]
) -> None:
    problem, sample, turn = place
    derived = request_seed(seed, problem, sample, turn)
    assert 0 <= derived < 2**SEED_BITS
    others = {
        request_seed(seed + 1, problem, sample, turn),
        request_seed(seed, problem + "x", sample, turn),
        request_seed(seed, problem, sample + 1, turn),
        request_seed(seed, problem, sample, turn + 1),
    }
    assert derived not in others and len(others) == 4


def test_a_seed_is_the_same_in_another_process() -> None:
    """Not Python's salted `hash`: a resumed run's worker and a re-run draw alike."""
    code = (
        "from cobalt.orchestrator.rollouts.request_seeds import request_seed;"
        "print(request_seed(3, 'double-1', 2, 1))"
    )
    shown = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": salt},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for salt in ("1", "2")
    }
    assert shown == {str(request_seed(3, "double-1", 2, 1))}
