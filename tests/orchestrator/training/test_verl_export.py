"""`cobalt train export-verl`, and the exported reward function scoring rows of the
exported parquet through the real executor, as verl's reward loop would call it."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pyarrow.parquet as pq
import pytest
from sqlalchemy.orm import Session, sessionmaker

from cobalt.shared.errors import InvalidInput
from cobalt.shared.reward.verl import close_clients
from tests.support.runs import cobalt
from tests.support.training import RIGHT, WRONG, bandit_dataset


def load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("cobalt_reward_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_export_writes_parquet_reward_and_launcher_that_score_through_the_executor(
    cli_env: dict[str, str],
    sessions: sessionmaker[Session],
    policy_dir: Path,
    executor_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bandit_dataset(sessions)
    out = tmp_path / "verl"
    done = cobalt(
        cli_env, "train", "export-verl", "--contexts", "ctx", "--out", str(out),
        "--model", "/models/policy", "--contexts-per-step", "2", "--n-samples", "8",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.iterdir()) == [
        "cobalt_reward.py",
        "run_verl.sh",
        "train.parquet",
    ]
    script = (out / "run_verl.sh").read_text()
    assert "actor_rollout_ref.rollout.n=8" in script and "data.train_batch_size=2" in script
    assert (out / "run_verl.sh").stat().st_mode & 0o111
    rows = pq.read_table(out / "train.parquet").to_pylist()
    assert [row["extra_info"]["prev_best"] for row in rows] == [0.0, 0.25]

    monkeypatch.setenv("COBALT_EXECUTOR_URL", executor_url)
    monkeypatch.setenv("COBALT_POLICY_TOKENIZER", str(policy_dir))
    reward = load(out / "cobalt_reward.py")
    later = rows[1]

    async def score_many() -> list[dict[str, object]]:
        calls = [
            reward.compute_score(
                later["data_source"], text, later["reward_model"]["ground_truth"],
                later["extra_info"],
            )
            for text in [RIGHT, WRONG] * 10
        ]  # fmt: skip
        try:
            return list(await asyncio.gather(*calls))
        finally:
            await close_clients()

    results = asyncio.run(score_many())
    assert {r["score"] for r in results[::2]} == {1.0}
    assert all(r["before_format"] == pytest.approx(-0.2) for r in results[1::2])
    assert results[1]["tests_passed"] == 0 and results[1]["tests_total"] == 4
    blocking = reward.compute_score_blocking(
        "x", RIGHT, later["reward_model"]["ground_truth"], {"prev_best": 0.0}
    )
    assert blocking["score"] == 1.0 and blocking["pass_rate"] == 1.0


def test_the_reward_function_refuses_what_it_cannot_score(
    monkeypatch: pytest.MonkeyPatch, policy_dir: Path, executor_url: str
) -> None:
    from cobalt.shared.reward.verl import compute_score_blocking

    monkeypatch.setenv("COBALT_POLICY_TOKENIZER", str(policy_dir))
    truth = json.dumps({"tests": [{"stdin": "1", "expected_stdout": "2"}]})
    monkeypatch.delenv("COBALT_EXECUTOR_URL", raising=False)
    with pytest.raises(InvalidInput, match="COBALT_EXECUTOR_URL"):
        compute_score_blocking("x", RIGHT, truth, {})
    monkeypatch.setenv("COBALT_EXECUTOR_URL", executor_url)
    with pytest.raises(InvalidInput, match="ground_truth"):
        compute_score_blocking("x", RIGHT, '{"answer": 4}', {})
    with pytest.raises(InvalidInput, match="no tests"):
        compute_score_blocking("x", RIGHT, '{"tests": []}', {})
