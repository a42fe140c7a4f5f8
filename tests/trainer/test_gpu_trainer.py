"""The GPU script's whole path at a tiny size on the CPU (bench/gpu_trainer.py --device cpu
--tiny), so it cannot rot while no GPU is at hand: every section present with sane values
(never times), its time guard, and the wheel list it needs on the GPU machine."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from cobalt.shared.cpu_dtype import CPUINFO_VARIABLE
from tests.trainer.conftest import CPU_WITHOUT_BF16

ROOT = Path(__file__).resolve().parents[2]
WHEELS = ROOT / "bench" / "gpu_trainer_wheels.txt"
_SPEC = importlib.util.spec_from_file_location("gpu_trainer", ROOT / "bench" / "gpu_trainer.py")
assert _SPEC is not None and _SPEC.loader is not None
gpu_trainer = importlib.util.module_from_spec(_SPEC)
sys.modules["gpu_trainer"] = gpu_trainer  # its dataclasses look their module up
_SPEC.loader.exec_module(gpu_trainer)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The dry-run as a command, in a process of its own: its imports are its own (the
    wheel list is checked against them)."""
    out = tmp_path_factory.mktemp("gpu_trainer") / "run.json"
    done = subprocess.run(
        [sys.executable, "bench/gpu_trainer.py", "--device", "cpu", "--tiny", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, check=False, timeout=900,
        env={**os.environ, CPUINFO_VARIABLE: str(CPU_WITHOUT_BF16)},  # as every trainer test
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "3. speed of the step" in done.stdout  # the table printed
    data: dict[str, Any] = json.loads(out.read_text())
    return data


def test_the_equality_checks_run_in_both_dtypes_and_pass(tiny_run: dict[str, Any]) -> None:
    rows = tiny_run["equality"]
    assert {row["dtype"] for row in rows} == {"float32", "bfloat16"}
    for kind in ("micro-batches of", "chunks of", "one packed row", "shared prompts against",
                 "a LoRA step"):  # fmt: skip
        assert sum(row["name"].startswith(kind) for row in rows) == 2, kind  # once per dtype
    for row in rows:
        assert row["passed"] and not row["outside"], row
        assert row["differences"] and all(
            math.isfinite(d["max_abs"]) for d in row["differences"].values()
        )


def test_memory_rows_cover_both_models_at_every_budget_beside_the_estimate(
    tiny_run: dict[str, Any],
) -> None:
    rows = tiny_run["memory"]["rows"]
    assert [(row["trains"], row["budget"]) for row in rows] == [
        ("every weight", 64), ("every weight", 128), ("every weight", 256),
        ("LoRA r=4", 64), ("LoRA r=4", 128), ("LoRA r=4", 256),
    ]  # fmt: skip
    for row in rows:
        assert row["measure"].startswith("cpu: peak resident memory")  # labelled
        assert row["largest_micro_batch"] == row["budget"]  # the workload fills it
        assert row["measured_gib"] > 0 and row["predicted_gib"] > 0
        assert abs(row["error"]) < 0.5, row
        assert row["checkpointing"] and row["compute_dtype"] == "float32"
        terms = row["predicted_terms_bytes"]
        assert terms["activations"] > 0 and terms["sharded_state"] > 0
    full, lora = rows[0], rows[3]
    assert full["reference"] and full["trained_parameters"] == full["parameters"]
    assert 0 < lora["trained_parameters"] < lora["parameters"]
    assert (
        rows[2]["predicted_terms_bytes"]["activations"]
        > rows[0]["predicted_terms_bytes"]["activations"]
    )  # the budget sets the activations


def test_speed_rows_with_and_without_prompt_sharing(tiny_run: dict[str, Any]) -> None:
    section = tiny_run["speed"]
    off, on = section["rows"]
    assert (off["share_prompts"], on["share_prompts"]) == (False, True)
    assert off["tokens"] == on["tokens"] > 0  # the same work either way
    assert on["forwarded_tokens"] < off["forwarded_tokens"]  # the prompt once
    assert on["micro_batches"] <= off["micro_batches"]
    assert 0 < on["model_flops"] < off["model_flops"]
    for row in (off, on):
        assert row["tokens_per_s"] > 0 and row["achieved_tflops"] > 0
        assert row["sdpa_kernels"] and all(count > 0 for count in row["sdpa_kernels"].values())
        assert row["mfu"] is None  # no peak known for a CPU
    assert section["sharing_speedup"] > 0
    assert tiny_run["skipped"] == []


def test_the_time_guard_skips_what_does_not_fit_and_still_writes_the_json(
    tmp_path: Path,
) -> None:
    out = tmp_path / "guarded.json"
    assert (
        gpu_trainer.main(["--device", "cpu", "--tiny", "--budget-s", "0", "--out", str(out)]) == 0
    )
    data = json.loads(out.read_text())
    skipped = [entry["what"] for entry in data["skipped"]]
    assert "equality checks in torch.float32" in skipped
    assert any(what.startswith("memory of Qwen3-tiny") for what in skipped)
    assert data["equality"] == [] and data["memory"]["rows"] == []


def test_a_missing_gpu_or_section_is_refused_with_the_fix_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(tmp_path / "x.json")
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit) as exited:
            gpu_trainer.main(["--tiny", "--device", "cuda", "--out", out])
        assert exited.value.code == 2 and "--device cpu" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        gpu_trainer.main(["--tiny", "--device", "cpu", "--sections", "memory,speeed", "--out", out])
    assert exited.value.code == 2 and "speeed" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()


def wheel_list() -> tuple[dict[str, str], set[str], set[str]]:
    """Pinned wheels, the image's packages and the optional ones, from the one list."""
    pins: dict[str, str] = {}
    image: set[str] = set()
    optional: set[str] = set()
    for line in WHEELS.read_text().splitlines():
        if line.startswith("# image:"):
            image |= set(line.removeprefix("# image:").split())
        elif line.startswith("# optional:"):
            optional.add(line.removeprefix("# optional:").split()[0])
        elif match := re.match(r"^([A-Za-z0-9_.-]+)==(\S+)", line):
            pins[match[1].lower()] = match[2]
    return pins, image, optional


def test_the_wheels_are_the_tested_versions_and_cover_what_the_run_imports(
    tiny_run: dict[str, Any],
) -> None:
    pins, image, optional = wheel_list()
    assert "verl" in pins and "ray" in pins
    for name, version in pins.items():
        assert importlib.metadata.version(name) == version, name  # .venv-trainer's
    imported = set(tiny_run["meta"]["distributions"])
    assert {"torch", "transformers", "verl", "ray", "pydantic"} <= imported
    missing = imported - image - pins.keys() - optional
    assert not missing, f"add to bench/gpu_trainer_wheels.txt (or its image line): {missing}"
