"""Token ids and logprobs stored as packed binary arrays, not JSON.

A turn from vLLM carries hundreds to thousands of prompt and completion token ids and one
logprob per completion token. As JSON they were most of a turn row's bytes, and turning
floats into decimal text (and PostgreSQL parsing it back) cost more than the rest of the
insert: bench/turn_writes.py measured 2,300 turn rows/s with them against 7,900 without.
Packed, a list is one `bytes` built in C, and PostgreSQL stores it as `bytea` untouched.

Layout, fixed so other tools can read the columns without Cobalt (numpy:
`np.frombuffer(value, "<i4")` and `np.frombuffer(value, "<f8")`):
- token ids: little-endian signed 32-bit integers (every vocabulary fits);
- logprobs: little-endian IEEE 754 doubles, so a value reads back exactly as the endpoint
  sent it (vLLM's are float32 values, but another endpoint's need not be).

The ORM columns still hold Python lists; only the database sees bytes.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Sequence
from typing import Any

from sqlalchemy import LargeBinary
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

__all__ = [
    "PackedFloat64List",
    "PackedInt32List",
    "pack_float64",
    "pack_int32",
    "unpack_float64",
    "unpack_int32",
]

_NATIVE_IS_LITTLE = sys.byteorder == "little"
# array's "i" is C int; "l" would be 8 bytes on Linux. Checked once, not assumed.
_INT32 = "i" if array("i").itemsize == 4 else "l"
assert array(_INT32).itemsize == 4, "no 32-bit integer array type on this platform"


def _to_bytes(values: array[Any]) -> bytes:
    if not _NATIVE_IS_LITTLE:
        values.byteswap()
    return values.tobytes()


def _from_bytes(typecode: str, data: bytes) -> array[Any]:
    values = array(typecode)
    if len(data) % values.itemsize:
        raise ValueError(
            f"a packed array of {values.itemsize}-byte items cannot be {len(data)} bytes long"
        )
    values.frombytes(data)
    if not _NATIVE_IS_LITTLE:
        values.byteswap()
    return values


def pack_int32(values: Sequence[int]) -> bytes:
    """Token ids as little-endian int32 bytes.

    Raises:
        OverflowError: a value does not fit in 32 bits (not a token id).
    """
    return _to_bytes(array(_INT32, values))


def unpack_int32(data: bytes) -> list[int]:
    """The token ids `pack_int32` packed."""
    return _from_bytes(_INT32, data).tolist()


def pack_float64(values: Sequence[float]) -> bytes:
    """Logprobs as little-endian float64 bytes (exact)."""
    return _to_bytes(array("d", values))


def unpack_float64(data: bytes) -> list[float]:
    """The values `pack_float64` packed."""
    return _from_bytes("d", data).tolist()


class PackedInt32List(TypeDecorator[list[int]]):
    """A nullable list of token ids, stored as `pack_int32` bytes (bytea / BLOB)."""

    impl = LargeBinary
    cache_ok = True

    def process_bind_param(self, value: list[int] | None, dialect: Dialect) -> bytes | None:
        return None if value is None else pack_int32(value)

    def process_result_value(self, value: bytes | None, dialect: Dialect) -> list[int] | None:
        return None if value is None else unpack_int32(bytes(value))


class PackedFloat64List(TypeDecorator[list[float]]):
    """A nullable list of logprobs, stored as `pack_float64` bytes (bytea / BLOB)."""

    impl = LargeBinary
    cache_ok = True

    def process_bind_param(self, value: list[float] | None, dialect: Dialect) -> bytes | None:
        return None if value is None else pack_float64(value)

    def process_result_value(self, value: bytes | None, dialect: Dialect) -> list[float] | None:
        return None if value is None else unpack_float64(bytes(value))
