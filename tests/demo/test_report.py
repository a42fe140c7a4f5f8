"""The demo's HTML report from a made-up result: figures, links, plots and the JSON copy."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cobalt.demo.options import DemoOptions
from cobalt.demo.pipeline import trained_policy_dir
from cobalt.demo.report import noise_verdict, write_report
from cobalt.demo.results import DemoResult, PhaseResult
from cobalt.orchestrator.analysis.statistics import MIN_PROBLEMS_FOR_A_VERDICT
from cobalt.shared.contracts.runs import EvaluationReport
from cobalt.shared.contracts.training import StepPublic, TrainingJobPublic


def _evaluation(run_id: int, pass_at_1: list[float]) -> EvaluationReport:
    return EvaluationReport(
        run_id=run_id, problems=2, samples=2, turns=len(pass_at_1), pass_at_1=pass_at_1,
        pass_at_k={"1": pass_at_1}, public_pass_at_1=[p / 2 for p in pass_at_1],
        pass_at_1_interval=[(max(0.0, p - 0.25), min(1.0, p + 0.25)) for p in pass_at_1],
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
    assert "<td>[0.000, 0.500]</td><td>[0.250, 0.750]</td></tr>" in text  # turn 0's intervals
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

    assert "<td>&lt;script&gt;</td><td>1</td>" in text and "<td><script>" not in text


BUILDER_COUNTS = {
    "problems": 6, "problems_all_pass_at_turn_0": 1, "trajectories": 24, "not_candidates": 4,
    "dropped_over_token_cap": 2, "turn_0_contexts": 5, "partial_contexts": 9, "mixed_in": {},
}  # fmt: skip


def test_the_report_says_what_was_trained_where_it_is_and_how_to_serve_it(
    tmp_path: Path,
) -> None:
    result = _result()
    result.trained_model = tmp_path / "checkpoints" / "job-7" / "step-2" / "policy"
    result.dataset = "humaneval-demo"
    result.bandit_counts, result.bandit_contexts = BUILDER_COUNTS, 14

    text = write_report(result, tmp_path / "report.html").read_text(encoding="utf-8")

    trained = text.index("<h2>What was trained</h2>")
    assert trained < text.index("<h2>Pass@1 per turn") < text.index("<h2>Bandit contexts")
    head = text[trained : text.index("<h2>Pass@1 per turn")]
    assert "smollm2 was trained with GRPO" in head and "for 2 steps" in head
    assert f"are in {result.trained_model}." in head
    assert (
        f"cobalt inference serve --model {result.trained_model} "
        "--served-name smollm2-135m-instruct-grpo-7"
    ) in head
    assert "cobalt run sample --dataset humaneval-demo --base-url http://127.0.0.1:8000/v1" in head
    # The builder's counts in words first; the raw counts folded away.
    assert (
        "14 contexts (5 from the problem alone, 9 after 1-3 feedback turns) from 6 problems; "
        "left out: 1 problems every sample solved at turn 0, 2 contexts over the token cap."
    ) in text
    assert text.index("The builder's counts") > text.index("14 contexts")
    assert 'href="http://127.0.0.1:8200/ui/#/compare/2/4"' in text
    data = json.loads(re.search(r'id="demo-data">(.*?)</script>', text, re.S).group(1))  # type: ignore[union-attr]
    assert data["trained_model"] == str(result.trained_model)


def test_without_a_policy_directory_the_report_says_so(tmp_path: Path) -> None:
    text = write_report(_result(), tmp_path / "report.html").read_text(encoding="utf-8")

    assert "left no policy directory" in text and "cobalt inference serve" not in text


def test_the_trained_policy_is_the_newest_step_of_the_job(tmp_path: Path) -> None:
    for job, step in ((7, 1), (7, 2), (8, 3)):
        policy = tmp_path / f"job-{job}" / f"step-{step}" / "policy"
        policy.mkdir(parents=True)
        (policy / "cobalt-policy.json").write_text(json.dumps({"step": step, "version": step}))
    (tmp_path / "job-7" / ".step-3.partial" / "policy").mkdir(parents=True)  # not complete

    assert trained_policy_dir(tmp_path, 7) == (tmp_path / "job-7" / "step-2" / "policy").resolve()
    assert trained_policy_dir(tmp_path, 9) is None


def test_a_turn_one_run_lacks_is_a_dash_not_zero(tmp_path: Path) -> None:
    result = _result()
    shorter = PhaseResult("after", 3, 4, 2, _evaluation(4, [0.5, 0.75]))
    result = DemoResult(**{**result.__dict__, "after": shorter})
    text = write_report(result, tmp_path / "report.html").read_text(encoding="utf-8")
    rows = re.findall(r"<tr><td>turn (\d)</td><td>([^<]+)</td><td>([^<]+)</td><td>([^<]*)", text)
    assert rows[2][:3] == ("2", "0.500", "-") and "0.000" not in rows[2][2]


def test_the_report_says_plainly_whether_the_change_is_larger_than_the_noise(
    tmp_path: Path,
) -> None:
    result = _result()
    result.change = [0.25, 0.0, 0.25]
    result.change_interval = [(0.05, 0.45), (-0.25, 0.25), (-0.1, 0.5)]
    result.compared_problems = [MIN_PROBLEMS_FOR_A_VERDICT] * 3
    text = write_report(result, tmp_path / "report.html").read_text(encoding="utf-8")
    assert "larger than the noise at turn 0 (up):" in text
    assert "<td>[+0.050, +0.450]</td>" in text  # turn 0's paired interval, beside the change
    data = json.loads(re.search(r'id="demo-data">(.*?)</script>', text, re.S).group(1))  # type: ignore[union-attr]
    assert data["change_interval"][1] == [-0.25, 0.25]

    result.change_interval = [(-0.2, 0.3), (-0.25, 0.25), (-0.1, 0.5)]
    text = write_report(result, tmp_path / "report.html").read_text(encoding="utf-8")
    assert "within the noise at every turn" in text and "cobalt experiment" in text


# The cell after a row's paired interval of the change (the one interval with signs).
VERDICT_CELL = r"<tr><td>turn \d</td>.*?<td>\[[+-][^\]]*\]</td><td>([^<]*)</td>"


def test_each_turns_row_says_what_its_interval_says_in_the_report_and_the_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The verdict sits in the row it judges: up or down beyond noise, within noise, or too
    few problems to say, in the HTML table and in the table `cobalt demo` prints."""
    from cobalt.demo.cli import _print_summary

    result = _result()
    result.change = [0.25, 0.0, -0.25]
    result.change_interval = [(0.05, 0.45), (-0.25, 0.25), (-0.45, -0.05)]
    result.compared_problems = [MIN_PROBLEMS_FOR_A_VERDICT] * 3
    result.report_path = tmp_path / "report.html"
    text = write_report(result, result.report_path).read_text(encoding="utf-8")
    verdicts = re.findall(VERDICT_CELL, text)
    assert verdicts == ["up, beyond noise", "within noise", "down, beyond noise"]

    monkeypatch.setenv("COLUMNS", "200")
    _print_summary(result)
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("│")]
    assert [row.split("│")[-2].strip() for row in rows] == verdicts

    result.compared_problems = [MIN_PROBLEMS_FOR_A_VERDICT - 1] * 3
    text = write_report(result, result.report_path).read_text(encoding="utf-8")
    verdicts = re.findall(VERDICT_CELL, text)
    assert verdicts == ["too few problems"] * 3


def test_a_handful_of_problems_gives_no_verdict_however_far_the_interval_is_from_0(
    tmp_path: Path,
) -> None:
    """`make demo PROBLEMS=4`: an interval over 4 problems shows their samples' noise, so
    the demo says it cannot call the change (as the experiment's report and `cobalt run
    compare` do), and says better once the problems are enough."""
    result = _result()
    result.change = [0.5, 0.5, 0.5]
    result.change_interval = [(0.25, 0.75)] * 3
    result.compared_problems = [MIN_PROBLEMS_FOR_A_VERDICT - 1] * 3
    text = write_report(result, tmp_path / "report.html").read_text(encoding="utf-8")
    assert "Too few problems to call the change" in text
    assert "larger than the noise" not in text
    data = json.loads(re.search(r'id="demo-data">(.*?)</script>', text, re.S).group(1))  # type: ignore[union-attr]
    assert data["change_verdict"] == ["too_few_problems"] * 3

    result.compared_problems = [MIN_PROBLEMS_FOR_A_VERDICT] * 3
    assert noise_verdict(result).startswith("The change is larger than the noise at turn 0 (up)")
