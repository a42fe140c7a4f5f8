"""`cobalt inference serve` picks the CPU dtype by the rule of cobalt.shared.cpu_dtype, says
so once at start-up, and passes it to vLLM; COBALT_INFERENCE_DTYPE / --dtype override it.
CPU flags come from fixture files (tests/support/cpuinfo), not from this machine."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import cobalt.shared.cpu_dtype
from tests.support.cli import Invoked, cobalt_here

CPUINFO = Path(__file__).parents[1] / "support" / "cpuinfo"
EPYC = CPUINFO / "epyc-avx2.txt"
XEON = CPUINFO / "xeon-amx.txt"


def dry_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cpuinfo: Path, *args: str, **env: str
) -> tuple[dict[str, object], Invoked]:
    monkeypatch.setattr(cobalt.shared.cpu_dtype, "CPUINFO", cpuinfo)
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text("{}")
    base = {k: v for k, v in os.environ.items() if not k.startswith("COBALT_")}
    base.update({"COBALT_INFERENCE_MODEL": str(model), "COBALT_INFERENCE_DEVICE": "cpu", **env})
    done = cobalt_here(base, "inference", "serve", "--dry-run", *args)
    assert done.returncode == 0, done.stderr
    plan: dict[str, object] = json.loads(done.stdout)
    return plan, done


def vllm_dtype(plan: dict[str, object]) -> str:
    command = plan["command"]
    assert isinstance(command, list) and command.count("--dtype") == 1
    return str(command[command.index("--dtype") + 1])


def test_an_avx2_cpu_serves_float32_and_logs_why_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    plan, done = dry_run(monkeypatch, tmp_path, EPYC)
    assert vllm_dtype(plan) == "float32"
    reason = "this CPU has no native bfloat16 (no amx_bf16 or avx512_bf16 flag)"
    assert isinstance(plan["dtype"], dict) and reason in plan["dtype"]["reason"]
    lines = [line for line in done.stderr.splitlines() if line.startswith("dtype ")]
    assert len(lines) == 1 and lines[0].startswith(f"dtype float32: {reason}")


def test_a_cpu_with_native_bfloat16_serves_bfloat16(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    plan, done = dry_run(monkeypatch, tmp_path, XEON)
    assert vllm_dtype(plan) == "bfloat16"
    lines = [line for line in done.stderr.splitlines() if line.startswith("dtype ")]
    assert lines == ["dtype bfloat16: this CPU computes bfloat16 natively (amx_bf16, avx512_bf16)"]


@pytest.mark.parametrize(
    ("cpuinfo", "args", "env", "dtype"),
    [
        (XEON, (), {"COBALT_INFERENCE_DTYPE": "float32"}, "float32"),
        (EPYC, (), {"COBALT_INFERENCE_DTYPE": "bfloat16"}, "bfloat16"),
        (EPYC, ("--dtype", "bfloat16"), {}, "bfloat16"),
        (XEON, ("--dtype", "float32"), {"COBALT_INFERENCE_DTYPE": "bfloat16"}, "float32"),
    ],
)
def test_a_dtype_set_by_variable_or_option_wins(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    cpuinfo: Path,
    args: tuple[str, ...],
    env: dict[str, str],
    dtype: str,
) -> None:
    plan, done = dry_run(monkeypatch, tmp_path, cpuinfo, *args, **env)
    assert vllm_dtype(plan) == dtype
    assert f"dtype {dtype}: set by COBALT_INFERENCE_DTYPE / --dtype" in done.stderr


def test_a_gpu_keeps_vllms_auto(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    plan, _ = dry_run(monkeypatch, tmp_path, EPYC, COBALT_INFERENCE_DEVICE="cuda")
    assert vllm_dtype(plan) == "auto"
