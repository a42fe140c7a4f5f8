"""`cobalt trainer serve` from the core environment: it re-executes itself in
.venv-trainer (torch, verl), and an unreachable orchestrator exits 3 with a message. Bad
settings exit 2 before any re-execution, so those tests run the command in this process.
`cobalt train export` re-executes the same way."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from cobalt.shared.ports import free_port
from tests.support.cli import cobalt_here
from tests.support.runs import cobalt
from tests.support.training import TRAINER_PYTHON

LORA_TOOLS = Path(__file__).parents[2] / "inference" / "lora_tools.py"


def test_serve_runs_in_the_trainer_environment_and_says_what_is_unreachable() -> None:
    port = free_port()  # nothing listens there
    env = {k: v for k, v in os.environ.items() if not k.startswith("COBALT_")}
    env["COBALT_TRAINER_ORCHESTRATOR_URL"] = f"http://127.0.0.1:{port}"
    done = cobalt(env, "trainer", "serve", "--job", "1", "--steps", "1")
    assert done.returncode == 3, done.stderr
    assert "cannot reach the orchestrator" in done.stderr
    assert "cobalt orchestrator serve" in done.stderr


def test_bad_trainer_settings_exit_2() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COBALT_")}
    env["COBALT_TRAINER_KEEP_CHECKPOINTS"] = "1"
    env["COBALT_TRAINER_PYTHON"] = "/nonexistent/python"  # never re-executes this process
    done = cobalt_here(env, "trainer", "serve", "--job", "1")
    assert done.returncode == 2 and "keep_checkpoints" in done.stderr


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("COBALT_TRAINER_SAVE_EVERY", "0", "whole number of steps"),
        ("COBALT_REPORT_TO", "tensorboard,comet", "comet is not a tracker"),
    ],
)
def test_a_bad_setting_exits_2_naming_the_variable_before_any_model_loads(
    variable: str, value: str, says: str
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COBALT_")}
    env[variable] = value
    env["COBALT_TRAINER_PYTHON"] = "/nonexistent/python"  # it never gets as far as torch
    done = cobalt_here(env, "trainer", "serve", "--job", "1")
    assert done.returncode == 2, done.stderr
    assert variable in done.stderr and says in done.stderr


def test_train_export_merges_a_lora_step_in_the_trainer_environment(
    tiny_model: Path, tmp_path: Path
) -> None:
    """`cobalt train export` from the core environment: the adapter of the newest step
    merged into the base it names, as a plain model directory; no step exits 2."""
    made = subprocess.run(
        [str(TRAINER_PYTHON), str(LORA_TOOLS), "adapter", str(tiny_model),
         str(tmp_path / "ckpt"), "3", "1", "[5, 17]", "2"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr[-3000:]
    env = {k: v for k, v in os.environ.items() if not k.startswith("COBALT_")}
    env["COBALT_TRAINER_CHECKPOINT_DIR"] = str(tmp_path / "ckpt")

    done = cobalt(env, "train", "export", "1", "--out", str(tmp_path / "merged"))

    assert done.returncode == 0, done.stderr[-3000:]
    assert "step 3 (policy version 3) merged" in done.stdout
    files = {path.name for path in (tmp_path / "merged").iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= files
    recorded = json.loads((tmp_path / "merged" / "cobalt-policy.json").read_text())
    assert recorded["version"] == 3  # the adapter's version, not the base's 0
    missing = cobalt(env, "train", "export", "2", "--out", str(tmp_path / "other"))
    assert missing.returncode == 2 and "no published step" in missing.stderr
