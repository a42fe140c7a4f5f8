"""Packed token-id and logprob arrays: exact round trips and a layout other tools can read."""

from __future__ import annotations

import math
import random
import struct

import pytest

from cobalt.orchestrator.store.packed import (
    pack_float64,
    pack_int32,
    unpack_float64,
    unpack_int32,
)


def test_token_ids_round_trip_as_little_endian_int32() -> None:
    ids = [0, 1, 151_642, -1, 2**31 - 1, -(2**31)]
    packed = pack_int32(ids)
    assert packed == struct.pack(f"<{len(ids)}i", *ids)
    assert unpack_int32(packed) == ids
    assert pack_int32([]) == b"" and unpack_int32(b"") == []


def test_logprobs_round_trip_bit_exactly_as_little_endian_float64() -> None:
    rng = random.Random(3)
    values = [-rng.random() * 20 for _ in range(500)] + [0.0, -0.0, -1e-310, -math.inf]
    packed = pack_float64(values)
    assert packed == struct.pack(f"<{len(values)}d", *values)
    back = unpack_float64(packed)
    assert [struct.pack("<d", v) for v in back] == [struct.pack("<d", v) for v in values]


def test_a_token_id_beyond_32_bits_is_refused_not_wrapped() -> None:
    with pytest.raises(OverflowError):
        pack_int32([2**31])


def test_bytes_that_are_not_whole_items_are_refused() -> None:
    with pytest.raises(ValueError, match="4-byte items cannot be 6 bytes"):
        unpack_int32(b"\x00" * 6)
    with pytest.raises(ValueError, match="8-byte items"):
        unpack_float64(b"\x00" * 12)
