"""`cobalt inference` commands that need transformers, run from the core environment,
re-run themselves in .venv-inference."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_make_tiny_model_from_the_core_command_runs_in_the_inference_environment(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COBALT_")}
    done = subprocess.run(
        [sys.executable, "-c", "from cobalt.shared.commands import main; main()", "inference",
         "make-tiny-model", str(tmp_path / "tiny")],
        env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "tiny" / "config.json").is_file()
    assert (tmp_path / "tiny" / "tokenizer.json").is_file()
