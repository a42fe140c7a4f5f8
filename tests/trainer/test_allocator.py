"""glibc keeps freed heap memory resident until it is trimmed; `release_freed_memory`
gives it back (the trainer calls it between micro-batches, docs/benchmarks.md)."""

from __future__ import annotations

import ctypes
import sys
from pathlib import Path

import pytest

from cobalt.trainer.allocator import glibc, release_freed_memory, set_mmap_threshold

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or glibc() is None, reason="glibc's malloc only"
)

MIB = 1024**2


def resident_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


def test_release_gives_freed_heap_blocks_back() -> None:
    libc = glibc()
    assert libc is not None
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    # 64 KiB blocks stay below the mmap threshold: they come from the heap, and freeing
    # them (with a block after them pinning the heap's top) keeps their pages resident.
    blocks = [libc.malloc(64 * 1024) for _ in range(1024)]
    pin = libc.malloc(64 * 1024)
    for block in blocks:
        ctypes.memset(block, 1, 64 * 1024)
    for block in blocks:
        libc.free(block)
    before = resident_bytes()
    assert release_freed_memory()
    after = resident_bytes()
    libc.free(pin)
    assert before - after >= 32 * MIB  # of the 64 MiB freed


def test_mmap_threshold_is_accepted() -> None:
    assert set_mmap_threshold(32 * MIB)  # glibc's own ceiling for the dynamic threshold
