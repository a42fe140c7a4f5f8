"""The CPU dtype rule (cobalt.shared.cpu_dtype): bfloat16 only where the CPU computes it
natively, float32 elsewhere. CPU flags come from fixture files, never from the machine
running the tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import cobalt.shared.cpu_dtype
from cobalt.shared.cpu_dtype import NATIVE_BF16_FLAGS, choose_cpu_dtype, read_cpu_flags

CPUINFO = Path(__file__).parents[1] / "support" / "cpuinfo"
EPYC = CPUINFO / "epyc-avx2.txt"  # Zen 2: AVX2, no AVX-512, no bfloat16 (issue 32's machine)
XEON = CPUINFO / "xeon-amx.txt"  # Sapphire Rapids: avx512_bf16 and amx_bf16

OTHER_FLAGS = ["avx2", "avx512f", "avx512bw", "avx512_vnni", "amx_tile", "amx_int8", "fma"]


def test_flags_are_read_from_cpuinfo() -> None:
    epyc, xeon = read_cpu_flags(EPYC), read_cpu_flags(XEON)
    assert "avx2" in epyc and "avx512f" not in epyc and not epyc & set(NATIVE_BF16_FLAGS)
    assert {"avx512_bf16", "amx_bf16", "amx_tile"} <= xeon


def test_an_avx2_cpu_serves_float32_and_says_why() -> None:
    choice = choose_cpu_dtype(read_cpu_flags(EPYC))
    assert choice.dtype == "float32"
    assert "no native bfloat16" in choice.reason and "avx512_bf16" in choice.reason
    assert choice.log_line().startswith("dtype float32: ")


def test_a_cpu_with_amx_serves_bfloat16_and_names_its_flags() -> None:
    choice = choose_cpu_dtype(read_cpu_flags(XEON))
    assert choice.dtype == "bfloat16"
    assert "amx_bf16" in choice.reason and "avx512_bf16" in choice.reason


@given(st.sets(st.sampled_from([*NATIVE_BF16_FLAGS, *OTHER_FLAGS])))
def test_bfloat16_exactly_when_a_native_flag_is_present(flags: set[str]) -> None:
    native = bool(flags & set(NATIVE_BF16_FLAGS))
    assert choose_cpu_dtype(flags).dtype == ("bfloat16" if native else "float32")


def test_no_flags_to_read_means_float32(tmp_path: Path) -> None:
    assert read_cpu_flags(tmp_path / "missing") == frozenset()
    (tmp_path / "arm").write_text("processor\t: 0\nFeatures\t: fp asimd bf16\n")
    assert choose_cpu_dtype(read_cpu_flags(tmp_path / "arm")).dtype == "float32"


@pytest.mark.parametrize(("cpuinfo", "dtype"), [(EPYC, "float32"), (XEON, "bfloat16")])
def test_without_flags_given_the_machine_file_is_read(
    monkeypatch: pytest.MonkeyPatch, cpuinfo: Path, dtype: str
) -> None:
    monkeypatch.setattr(cobalt.shared.cpu_dtype, "CPUINFO", cpuinfo)
    assert choose_cpu_dtype().dtype == dtype


def test_the_cpuinfo_variable_names_the_file_every_process_reads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """COBALT_CPUINFO reaches processes a caller starts (torchrun ranks, scripts)."""
    monkeypatch.setenv("COBALT_CPUINFO", str(EPYC))
    assert read_cpu_flags() == read_cpu_flags(EPYC)
    assert choose_cpu_dtype(read_cpu_flags()).dtype == "float32"
    monkeypatch.setenv("COBALT_CPUINFO", str(XEON))
    assert choose_cpu_dtype(read_cpu_flags()).dtype == "bfloat16"
