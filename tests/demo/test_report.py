"""The demo's HTML report from a made-up result: figures, links, plots and the JSON copy."""

from __future__ import annotations

import json
import re
from pathlib import Path

from cobalt.demo.options import DemoOptions
from cobalt.demo.report import write_report
from cobalt.demo.results import DemoResult, PhaseResult
from cobalt.shared.contracts.runs import EvaluationReport
from cobalt.shared.contracts.training import StepPublic, TrainingJobPublic


def _evaluation(run_id: int, pass_at_1: list[float]) -> EvaluationReport:
    return EvaluationReport(
        run_id=run_id, problems=2, samples=2, turns=len(pass_at_1), pass_at_1=pass_at_1,
        pass_at_k={"1": pass_at_1}, public_pass_at_1=[p / 2 for p in pass_at_1],
        failed_trajectories=0,
    )  # fmt: skip


def _result() -> DemoResult:
    steps = [
        StepPublic(step=1, policy_version=1, metrics={"reward_mean": -0.1, "pass_rate": 0.25}),
        StepPublic(step=2, policy_version=2, metrics={"reward_mean": 0.05, "pass_rate": 0.5}),
    ]
    training = TrainingJobPublic(
        id=7, name="demo", mode="cobalt", status="running", contexts="demo-run-2",
        model="/m", params={}, step=2, policy_version=2, groups={}, error=None,
        created_at="2026-11-23T00:00:00Z", steps=steps,
    )  # fmt: skip
    return DemoResult(
        options=DemoOptions(problems=2, samples=2, turns=2, steps=2),
        model_dir=Path("/models/smollm2"), served_model="smollm2-135m-instruct",
        before=PhaseResult("before", 1, 2, 0, _evaluation(2, [0.25, 0.5, 0.5])),
        after=PhaseResult("after", 3, 4, 2, _evaluation(4, [0.5, 0.5, 0.75])),
        bandit_name="demo-run-2", bandit_contexts=5, bandit_counts={"contexts": 5},
        training=training, ui_url="http://127.0.0.1:8200",
        database_url="sqlite:////tmp/cobalt.db", timings={"training": 61.0},
    )  # fmt: skip


def test_the_report_shows_each_turn_before_and_after_and_links_into_the_ui(
    tmp_path: Path,
) -> None:
    path = write_report(_result(), tmp_path / "report.html")

    text = path.read_text(encoding="utf-8")
    rows = re.findall(r"<tr><td>turn (\d)</td><td>([\d.]+)</td><td>([\d.]+)</td>", text)
    assert rows == [("0", "0.250", "0.500"), ("1", "0.500", "0.500"), ("2", "0.500", "0.750")]
    for fragment in ("runs/2", "runs/4", "runs/4?compare=2", "training/7", "bandit/demo-run-2"):
        assert f'href="http://127.0.0.1:8200/ui/#/{fragment}"' in text
    assert text.count("data:image/png;base64,") == 2
    assert (tmp_path / "pass_at_1.png").stat().st_size > 0
    assert (tmp_path / "training.png").stat().st_size > 0
    data = json.loads(re.search(r'id="demo-data">(.*?)</script>', text, re.S).group(1))  # type: ignore[union-attr]
    assert data["before"]["pass_at_1"] == [0.25, 0.5, 0.5]
    assert data["after"]["policy_version"] == 2
    assert [s["reward_mean"] for s in data["training"]["steps"]] == [-0.1, 0.05]


def test_text_from_the_run_is_escaped(tmp_path: Path) -> None:
    result = _result()
    result.bandit_counts = {"<script>": 1}

    text = write_report(result, tmp_path / "report.html").read_text(encoding="utf-8")

    assert "&lt;script&gt; 1" in text and "<script>: 1" not in text
