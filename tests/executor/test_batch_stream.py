"""A batch's response is sent one program at a time (issue 48, degraded: the skipped
results of a 500,000-test batch cost +693 MiB when serialized whole)."""

from __future__ import annotations

import json
import tracemalloc

from hypothesis import given, settings
from hypothesis import strategies as st

from cobalt.executor.batch_stream import PIECE_BYTES, batch_json_pieces
from cobalt.executor.judge import skipped
from cobalt.executor.service import execute_response
from cobalt.shared.contracts import BatchExecuteResponse, TestResult, Verdict


def _batch(programs: int, tests: int) -> BatchExecuteResponse:
    result = skipped("Not run: an earlier test failed.")
    return BatchExecuteResponse(
        results=[execute_response([result] * tests) for _ in range(programs)]
    )


def test_half_a_million_skipped_results_are_sent_holding_one_program_at_a_time() -> None:
    """The server's peak while it makes the body is about one program's JSON, not the
    body's (~100 MB): measured in allocations (tracemalloc), not time."""
    batch = _batch(250, 2000)
    sizes: list[int] = []
    tracemalloc.start()
    for piece in batch_json_pieces(batch):
        sizes.append(len(piece))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    body = sum(sizes)
    assert body > 50 << 20  # half a million results of ~200 bytes each
    assert peak < 4 * max(sizes) + (1 << 20)
    assert peak < body / 10
    assert max(sizes) < PIECE_BYTES + (1 << 20)  # about a megabyte a piece


verdicts = st.sampled_from(list(Verdict))
results = st.builds(
    TestResult,
    verdict=verdicts,
    stdout=st.text(max_size=20),
    wall_ms=st.floats(0, 1e4),
    returned=st.none() | st.integers() | st.lists(st.text(max_size=3), max_size=3),
)


@settings(max_examples=50, deadline=None)
@given(programs=st.lists(st.lists(results, min_size=1, max_size=5), min_size=1, max_size=5))
def test_the_streamed_body_is_the_batch_response(programs: list[list[TestResult]]) -> None:
    batch = BatchExecuteResponse(results=[execute_response(tests) for tests in programs])
    whole = json.loads(batch.model_dump_json())
    streamed = json.loads(b"".join(batch_json_pieces(batch)))
    assert streamed == whole
    assert BatchExecuteResponse.model_validate(streamed).results[0].total == len(programs[0])
