"""The response budget: program-sized text capped in JSON bytes as sent, as tests finish
(property tests over generated outputs; control characters, CJK and emoji included)."""

from __future__ import annotations

import json
import threading

from hypothesis import given, settings
from hypothesis import strategies as st

from cobalt.executor.response_budget import (
    CAPPED_FIELDS,
    ResponseBudget,
    json_bytes,
    result_bytes,
    truncate_to_json_bytes,
)
from cobalt.shared.contracts import TestResult, Verdict

# Characters whose JSON size differs: control bytes (6), ASCII (1-2), CJK (3), emoji (4).
texts = st.text(
    alphabet=st.sampled_from(["\x00", "\x01", "\x1f", "\n", '"', "\\", "a", "é", "中", "😀"]),
    max_size=3000,
)


@settings(max_examples=200, deadline=None)
@given(text=texts)
def test_json_bytes_is_what_the_response_serializer_writes(text: str) -> None:
    empty = len(TestResult(verdict=Verdict.ACCEPTED).model_dump_json())
    sent = len(TestResult(verdict=Verdict.ACCEPTED, stdout=text).model_dump_json().encode())
    assert json_bytes(text) == sent - empty
    assert json_bytes(text) == len(json.dumps(text, ensure_ascii=False).encode()) - 2


def test_a_control_byte_counts_six() -> None:
    assert json_bytes("\x01" * 1000) == 6000  # the case a character cap missed


@settings(max_examples=300, deadline=None)
@given(text=texts, budget=st.integers(min_value=0, max_value=20_000))
def test_truncation_fits_the_byte_budget_and_keeps_what_fits(text: str, budget: int) -> None:
    cut = truncate_to_json_bytes(text, budget)
    assert json_bytes(cut) <= budget
    if json_bytes(text) <= budget:
        assert cut == text
    elif cut:
        assert "omitted" in cut  # said, not silently dropped


def _result(stdout: str, stderr: str, feedback: str) -> TestResult:
    return TestResult(verdict=Verdict.WRONG_ANSWER, stdout=stdout, stderr=stderr, feedback=feedback)


@settings(max_examples=100, deadline=None)
@given(
    outputs=st.lists(st.tuples(texts, texts, texts), min_size=1, max_size=12),
    total=st.integers(min_value=0, max_value=40_000),
)
def test_a_response_never_exceeds_its_budget_and_each_test_keeps_its_share(
    outputs: list[tuple[str, str, str]], total: int
) -> None:
    budget = ResponseBudget(total, len(outputs))
    originals = [_result(*texts_) for texts_ in outputs]
    taken: list[TestResult | None] = [None] * len(originals)

    def finish(index: int) -> None:
        taken[index] = budget.take(originals[index])

    # Tests finish on sandbox threads, in any order.
    threads = [threading.Thread(target=finish, args=(i,)) for i in range(len(originals))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    capped = [result for result in taken if result is not None]
    assert sum(result_bytes(result) for result in capped) <= total
    fair = total // len(originals)
    for original, result in zip(originals, capped, strict=True):
        if result_bytes(original) <= fair:
            assert result == original  # within its share: never cut
        for name in CAPPED_FIELDS:
            assert json_bytes(getattr(result, name)) <= json_bytes(getattr(original, name))


def test_one_big_output_among_quiet_tests_keeps_the_unused_budget() -> None:
    budget = ResponseBudget(100_000, 10)
    quiet = [budget.take(_result("ok", "", "Passed.")) for _ in range(9)]
    loud = budget.take(_result("x" * 80_000, "", ""))
    assert all(r.stdout == "ok" for r in quiet)
    assert loud.stdout == "x" * 80_000  # far over its 10,000-byte share, and still whole
