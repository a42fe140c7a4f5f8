"""`cobalt inference serve --dry-run` says what a start would do and does none of it: no
model conversion (the default model's is 326 MB), no file, no process."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.support.cli import cobalt_here


def test_dry_run_writes_nothing_and_says_it_would_prepare_the_model(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    env = {k: v for k, v in os.environ.items() if not k.startswith("COBALT_")}
    env.update(COBALT_INFERENCE_MODEL_CACHE=str(cache), COBALT_INFERENCE_DEVICE="cpu")
    done = cobalt_here(env, "inference", "serve", "--dry-run")
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert plan["device"] == "cpu" and plan["command"]
    assert Path(plan["prepare_model"]["out"]).is_relative_to(cache)
    assert list(tmp_path.rglob("*")) == []  # not even the cache directory
