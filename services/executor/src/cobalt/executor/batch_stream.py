"""A batch's response, serialized and sent one program at a time.

A batch may hold hundreds of thousands of tests (1,024 programs of up to
`max_tests_per_request` each). Serialized whole, its response was one JSON text of
~200 bytes a test, held two or three times over while it was built and sent: a batch of
500,000 skipped tests (each result one shared object) cost the server +693 MiB. Here each
program's response is serialized on its own (pydantic's serializer, straight to bytes)
when the client is ready for it, and let go once sent, so the server holds about a
megabyte of JSON at a time (or one program's, if larger) besides the results
themselves. The body is the same JSON object (`BatchExecuteResponse`), sent chunked.
"""

from __future__ import annotations

from collections.abc import Iterator

from fastapi.responses import StreamingResponse

from cobalt.shared.contracts import BatchExecuteResponse, ExecuteResponse

__all__ = ["PIECE_BYTES", "batch_json_pieces", "streamed_batch"]

_SERIALIZER = ExecuteResponse.__pydantic_serializer__


PIECE_BYTES = 1 << 20
"""Programs' JSON is sent in pieces of about this size (one program's if larger): each
piece is made on a worker thread, and a piece per program would pay that hop for each of
a batch's thousand small programs."""


def batch_json_pieces(batch: BatchExecuteResponse) -> Iterator[bytes]:
    """The JSON of `batch`, in pieces of whole programs' responses. Each program is
    dropped from `batch` once serialized (the batch is being sent, nothing reads it
    after)."""
    programs = batch.results
    parts = [b'{"results":[']
    size = 0
    for index in range(len(programs)):
        piece = _SERIALIZER.to_json(programs[index])
        programs[index] = None  # type: ignore[call-overload]
        parts += (b",", piece) if index else (piece,)
        size += len(piece)
        if size >= PIECE_BYTES:
            yield b"".join(parts)
            parts, size = [], 0
    parts.append(b"]}")
    yield b"".join(parts)


def streamed_batch(batch: BatchExecuteResponse) -> StreamingResponse:
    """`batch` as a streamed JSON response (made on a worker thread, piece by piece as
    the client reads: a slow reader holds the next piece back, not the whole body)."""
    return StreamingResponse(batch_json_pieces(batch), media_type="application/json")
