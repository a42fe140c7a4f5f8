"""How glibc's malloc hands freed tensor memory back to the system (the CPU path).

On the CPU torch allocates tensors with malloc. glibc serves an allocation from its own
mapping (unmapped when freed) only above its mmap threshold, and that threshold rises with
the largest block freed so far, up to 32 MiB: after the first large tensor is freed, the
step's activations, logits chunks and gradients come from the heaps, where freed blocks
stay resident and fragment. Measured on SmolLM2-135M (docs/benchmarks.md, "Resident
memory against glibc"), resident memory peaked at 4.81 GiB for 3.37 GiB in use, and grew
with each micro-batch; with the threshold fixed at 128 KiB (`set_mmap_threshold`, which
the trainer does at start: `TrainerSettings.malloc_mmap_threshold`) it peaked at 3.65 GiB,
the bytes in use plus the runtime's own, flat from 2 to 4 groups, for 16-31 % more step
time (each large tensor's pages are faulted in fresh). `release_freed_memory` (`malloc_trim(0)`)
between micro-batches was measured too, and does less (4.22 GiB): it cannot undo the
fragmentation inside a micro-batch.

Off glibc (musl, macOS) both are no-ops returning False. On GPUs the device memory is
torch's caching allocator's; only host allocations (checkpoint copies) are affected.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

__all__ = ["DEFAULT_MMAP_THRESHOLD", "glibc", "release_freed_memory", "set_mmap_threshold"]

DEFAULT_MMAP_THRESHOLD = 128 * 1024
"""glibc's own starting threshold, kept fixed: a tensor of 32k float32 values or more gets
its own mapping, returned to the system when the tensor is freed."""

_M_MMAP_THRESHOLD = -3  # mallopt's parameter number (malloc.h)


@functools.cache
def glibc() -> ctypes.CDLL | None:
    """The process's C library if it is glibc (it has mallopt and malloc_trim), else None."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return None
    if not hasattr(libc, "malloc_trim") or not hasattr(libc, "mallopt"):
        return None
    libc.malloc_trim.argtypes = [ctypes.c_size_t]
    libc.malloc_trim.restype = ctypes.c_int
    libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    libc.mallopt.restype = ctypes.c_int
    return libc


def set_mmap_threshold(size: int) -> bool:
    """Serve every allocation of at least `size` bytes from its own mapping, unmapped on
    free (`mallopt(M_MMAP_THRESHOLD)`, which also stops the threshold from rising); for
    this process's allocations from now on. True if glibc took it."""
    libc = glibc()
    return bool(libc.mallopt(_M_MMAP_THRESHOLD, size)) if libc is not None else False


def release_freed_memory() -> bool:
    """Return the free pages of every malloc arena to the system (`malloc_trim(0)`); True
    if glibc released any."""
    libc = glibc()
    return bool(libc.malloc_trim(0)) if libc is not None else False
