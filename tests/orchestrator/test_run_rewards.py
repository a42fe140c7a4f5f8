"""Every evaluated turn's Cobalt reward, stored with its components (runs/rewards.py).

One problem with 2 public and 2 hidden tests, so p = accepted verdicts / 4; a second
problem has no hidden tests and is never scored. Trajectory s0, worked by hand:
  turn 0  public AW, hidden WW  p = .25, b = 0     tier 0.0, no improvement term   ->  0.0
  turn 1  no program            p = 0,   b = .25   no code at all                  -> -1.0
  turn 2  public AA, hidden AW  p = .75, b = .25   .2 + .1 (.75 - .25) / .75       -> .26667
Trajectory s1 is evaluated only up to turn 0 (its turn 1 has no hidden results yet).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker
from tokenizers import Tokenizer, models, pre_tokenizers

from cobalt.orchestrator.results.turn_export import TURN_COLUMNS
from cobalt.orchestrator.runs.evaluation import evaluate_run, stored_report
from cobalt.orchestrator.runs.rewards import (
    mean_reward_per_turn,
    run_reward_format,
    score_turn_rewards,
)
from cobalt.orchestrator.store import repo_datasets, repo_runs, repo_trajectories, repo_turns
from cobalt.orchestrator.store.models import Problem, Trajectory, Turn, TurnReward
from cobalt.orchestrator.store.repo_turns import TurnRow
from cobalt.shared.clients import ExecutorClient
from cobalt.shared.contracts.runs import INHERITED_BY_REFINE, RunParams, SampleRunRequest
from cobalt.shared.contracts.training import TrainingMode
from cobalt.shared.contracts.training_params import training_params
from cobalt.shared.errors import Conflict
from cobalt.shared.reward import RewardFormat, ScoreInput, TokenizerCounter, score_responses
from tests.fakes.flaky_executor import FlakyExecutor, serve_flaky_executor
from tests.support.cli import cobalt_here

ANSWER = "<think>Wait, check it.</think>\n```python\nprint(input())\n```\n"
TURNS = {  # (problem, sample) -> per turn: (response, public, hidden or None)
    ("p1", 0): [
        (ANSWER, "AW", "WW"),
        ("I cannot fix it.", None, ""),
        (ANSWER, "AA", "AW"),
    ],
    ("p1", 1): [(ANSWER, "AA", "AA"), (ANSWER, "AA", None)],
    ("p2", 0): [(ANSWER, "AA", None)],  # evaluation leaves problems without hidden tests
}


def verdicts(flags: str | None) -> list[str]:
    return ["accepted" if f == "A" else "wrong_answer" for f in flags or ""]


@pytest.fixture
def words() -> TokenizerCounter:
    tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    return TokenizerCounter(tokenizer)


def stored_run(
    sessions: sessionmaker[Session],
    *,
    answer: str = ANSWER,
    params: dict[str, object] | None = None,
) -> int:
    tests = [{"stdin": str(i), "expected_stdout": str(i)} for i in range(2)]
    with sessions.begin() as session:
        dataset = repo_datasets.create_dataset(session, name="toy", source="jsonl")
        repo_datasets.insert_problems(
            session,
            dataset_id=dataset.id,
            rows=[
                {"external_id": name, "statement": name, "test_style": "stdin",
                 "public_tests": tests, "hidden_tests": tests if name == "p1" else []}
                for name in ("p1", "p2")
            ],
        )  # fmt: skip
        ids = {p.external_id: p.id for p in session.scalars(select(Problem))}
        run = repo_runs.create_run(
            session,
            kind="sample",
            dataset_id=dataset.id,
            base_url="http://model/v1",
            model="m",
            params=RunParams.model_validate({"n": 2, "turns": 2, **(params or {})}),
            template_name="default",
            template_sha256="ab" * 32,
            total_trajectories=3,
        )
        repo_trajectories.ensure_trajectories(
            session, run_id=run.id, keys=[(ids[p], s) for p, s in TURNS]
        )
        repo_turns.insert_turns(
            session,
            rows=[
                TurnRow(
                    run_id=run.id, problem_id=ids[problem], sample_index=sample,
                    turn_index=index, messages=[],
                    raw_response=answer if response == ANSWER else response,
                    stored_response=response,
                    code=None if public is None else "print(input())",
                    public_verdicts=verdicts(public), public_passed=public == "AA",
                    feedback="", model="m",
                )
                for (problem, sample), turns in TURNS.items()
                for index, (response, public, _) in enumerate(turns)
            ],
        )  # fmt: skip
        hidden = []
        for turn in session.scalars(select(Turn).where(Turn.run_id == run.id)):
            problem = next(name for name, i in ids.items() if i == turn.problem_id)
            flags = TURNS[(problem, turn.sample_index)][turn.turn_index][2]
            if flags is not None:
                hidden.append((turn.id, verdicts(flags), flags == "AA"))
        repo_turns.record_hidden_results(session, results=hidden)
        for trajectory in session.scalars(select(Trajectory)):
            trajectory.status = "finished"
    return run.id


def rewards(sessions: sessionmaker[Session]) -> dict[tuple[int, int], TurnReward]:
    with sessions() as session:
        rows = session.execute(
            select(Turn.sample_index, Turn.turn_index, TurnReward).join(
                TurnReward, TurnReward.turn_id == Turn.id
            )
        ).all()
    return {(sample, index): reward for sample, index, reward in rows}


def test_each_evaluated_turn_gets_its_reward_with_prev_best_from_earlier_turns(
    sessions: sessionmaker[Session], words: TokenizerCounter
) -> None:
    run_id = stored_run(sessions)
    assert score_turn_rewards(sessions, run_id, words, tokenizer="words") == 4
    stored = rewards(sessions)
    assert set(stored) == {(0, 0), (0, 1), (0, 2), (1, 0)}  # p2 has no hidden tests
    first, no_code, last = stored[(0, 0)], stored[(0, 1)], stored[(0, 2)]
    assert (first.pass_rate, first.prev_best, first.total) == (0.25, 0.0, 0.0)
    # "<", "think", ">", "Wait", ",", "check", "it", "."
    assert first.think_tokens == 8 and first.format_violations == []
    assert (no_code.no_code, no_code.total, no_code.prev_best) == (True, -1.0, 0.25)
    assert no_code.correctness is None and no_code.tests_passed == 0
    assert last.prev_best == 0.25 and last.pass_rate == 0.75
    assert last.correctness == 0.2 and last.improvement_rule == "added"
    assert last.total == pytest.approx(0.2 + 0.1 * 0.5 / 0.75)
    assert stored[(1, 0)].validation_reward == 1.0 and stored[(1, 0)].total == 1.0
    assert last.tokenizer == "words" and last.run_id == run_id


def test_scoring_again_adds_nothing_and_means_are_per_turn(
    sessions: sessionmaker[Session], words: TokenizerCounter
) -> None:
    run_id = stored_run(sessions)
    score_turn_rewards(sessions, run_id, words, tokenizer="words")
    assert score_turn_rewards(sessions, run_id, words, tokenizer="words") == 0
    means = mean_reward_per_turn(sessions, run_id, 4)
    assert means[0] == pytest.approx(0.5) and means[1] == -1.0
    assert means[2] == pytest.approx(0.2 + 0.1 * 0.5 / 0.75) and means[3] is None


def test_evaluate_with_a_tokenizer_reports_the_mean_reward_per_turn(
    sessions: sessionmaker[Session], words: TokenizerCounter, executor_url: str
) -> None:
    run_id = stored_run(sessions)
    with ExecutorClient(base_url=executor_url) as executor:
        plain = evaluate_run(sessions, run_id, executor)
        assert plain.mean_reward is None and rewards(sessions) == {}
        report = evaluate_run(sessions, run_id, executor, reward_tokens=words, tokenizer="w")
    # Evaluation ran s1's turn 1 (print(input()) passes every test), so it is scored too.
    assert rewards(sessions)[(1, 1)].total == 1.0 and len(rewards(sessions)) == 5
    assert report.mean_reward is not None
    assert report.mean_reward[:2] == [pytest.approx(0.5), pytest.approx((-1.0 + 1.0) / 2)]


def test_a_sandbox_error_in_evaluation_is_counted_apart_never_as_a_failed_problem(
    sessions: sessionmaker[Session], words: TokenizerCounter, executor_url: str
) -> None:
    run_id = stored_run(sessions)
    flaky = FlakyExecutor(executor_url, marker="print(input())")  # every program: unjudged
    with serve_flaky_executor(flaky) as url, ExecutorClient(base_url=url) as executor:
        report = evaluate_run(sessions, run_id, executor, reward_tokens=words, tokenizer="w")
    # s1's turn 1 was pending: sent, then re-sent twice, never judged and never stored.
    assert flaky.runs_of("print(input())") == 3
    assert report.sandbox_errors == 1 and report.problems == 0 and report.pass_at_1 is None
    assert (1, 1) not in rewards(sessions)  # no reward from a sandbox error
    with sessions() as session:
        pending = session.scalars(select(Turn).where(Turn.hidden_passed.is_(None))).all()
        assert any(t.code is not None and t.hidden_verdicts is None for t in pending)
    # The next evaluation, with the sandbox back, judges it: the problem is measured again.
    with ExecutorClient(base_url=executor_url) as executor:
        healed = evaluate_run(sessions, run_id, executor, reward_tokens=words, tokenizer="w")
    assert healed.sandbox_errors == 0 and healed.problems == 1
    assert rewards(sessions)[(1, 1)].total == 1.0


def test_a_stored_sandbox_error_is_never_scored(
    sessions: sessionmaker[Session], words: TokenizerCounter
) -> None:
    run_id = stored_run(sessions)
    with sessions.begin() as session:
        p1 = select(Problem.id).where(Problem.external_id == "p1").scalar_subquery()
        first = session.scalars(
            select(Turn).where(Turn.problem_id == p1, Turn.sample_index == 0, Turn.turn_index == 0)
        ).one()
        first.public_verdicts = ["accepted", "sandbox_error"]
    score_turn_rewards(sessions, run_id, words, tokenizer="words")
    # Sample 0's trajectory stops at its unjudged turn 0; sample 1 is scored as before.
    assert set(rewards(sessions)) == {(1, 0)}


INSTRUCT_ANSWER = "It reads a line.\n```python\nprint(input())\n```\n"
"""What an instruct model writes: no thinking block (the reasoning rules take 0.9 off)."""


@pytest.mark.parametrize("reward_format", list(RewardFormat))
def test_a_run_is_scored_with_the_rules_a_training_job_of_its_model_trains_with(
    sessions: sessionmaker[Session], words: TokenizerCounter, reward_format: RewardFormat
) -> None:
    run_id = stored_run(
        sessions, answer=INSTRUCT_ANSWER, params={"reward_format": reward_format.value}
    )
    score_turn_rewards(sessions, run_id, words, tokenizer="words")
    passing = rewards(sessions)[(1, 0)]  # every test passed, at turn 0
    job = training_params(TrainingMode.COBALT, {"reward_format": reward_format.value})
    [trained] = score_responses(
        [ScoreInput(INSTRUCT_ANSWER, tests_passed=4, tests_total=4, prev_best=0.0)],
        tokens=words,
        reward_format=job.reward_format,
    )
    assert passing.total == pytest.approx(trained.total)
    assert passing.format_violations == [str(v) for v in trained.format_violations]
    assert passing.total == (1.0 if reward_format is RewardFormat.INSTRUCT else pytest.approx(0.1))


def test_runs_and_training_jobs_default_to_the_same_rules() -> None:
    job = training_params(TrainingMode.COBALT, {})
    assert RunParams().reward_format == job.reward_format
    assert SampleRunRequest(dataset="d", base_url="u", model="m").reward_format == job.reward_format
    # a refine run continues its sample run's model: it keeps the rules unless told
    assert "reward_format" in INHERITED_BY_REFINE


def test_asking_for_other_rules_is_refused_once_rewards_are_stored(
    sessions: sessionmaker[Session], words: TokenizerCounter
) -> None:
    run_id = stored_run(sessions, answer=INSTRUCT_ANSWER)
    # nothing scored yet: the asked rules become the run's, and score it
    assert run_reward_format(sessions, run_id, RewardFormat.INSTRUCT) is RewardFormat.INSTRUCT
    score_turn_rewards(sessions, run_id, words, tokenizer="words")
    assert rewards(sessions)[(1, 0)].total == 1.0
    with pytest.raises(Conflict, match="scored with the instruct format rules"):
        run_reward_format(sessions, run_id, RewardFormat.REASONING)
    assert run_reward_format(sessions, run_id) is RewardFormat.INSTRUCT


def test_feedback_turns_of_problems_without_public_tests_are_counted(
    sessions: sessionmaker[Session],
) -> None:
    run_id = stored_run(sessions)
    assert stored_report(sessions, run_id).turns_without_feedback == 0
    with sessions.begin() as session:
        p1 = session.scalars(select(Problem).where(Problem.external_id == "p1")).one()
        p1.public_tests = []
    # p1's feedback turns: sample 0's turns 1 and 2, sample 1's turn 1 (turn 0 has none)
    assert stored_report(sessions, run_id).turns_without_feedback == 3


def test_every_turn_exports_to_parquet_and_jsonl_with_its_reward(
    sessions: sessionmaker[Session],
    words: TokenizerCounter,
    cli_env: dict[str, str],
    tmp_path: Path,
) -> None:
    run_id = stored_run(sessions, params={"reward_format": "instruct"})
    score_turn_rewards(sessions, run_id, words, tokenizer="words")
    parquet, jsonl = tmp_path / "turns.parquet", tmp_path / "turns.jsonl.gz"
    for out in (parquet, jsonl):
        done = cobalt_here(cli_env, "run", "export", str(run_id), "--turns", "--out", str(out))
        assert done.returncode == 0, done.stderr
        assert f"6 turns of run {run_id} written to {out}" in done.stdout
    table = pq.read_table(parquet).to_pylist()
    with gzip.open(jsonl, "rt", encoding="utf-8") as lines:
        rows = [json.loads(line) for line in lines]
    assert len(table) == len(rows) == sum(len(turns) for turns in TURNS.values())
    assert set(rows[0]) == set(TURN_COLUMNS) == set(table[0])
    by_key = {(r["problem"], r["sample_index"], r["turn_index"]): r for r in rows}
    last = by_key[("p1", 0, 2)]
    assert (last["public_verdicts"], last["hidden_verdicts"]) == (verdicts("AA"), verdicts("AW"))
    assert last["reward"]["total"] == pytest.approx(0.2 + 0.1 * 0.5 / 0.75)
    assert last["reward_format"] == "instruct" and last["response"] == ANSWER
    assert by_key[("p1", 0, 1)]["program"] is None and by_key[("p2", 0, 0)]["reward"] is None
    from_parquet = {(r["problem"], r["sample_index"], r["turn_index"]): r for r in table}
    assert json.loads(from_parquet[("p1", 0, 2)]["reward"]) == last["reward"]
    # A file it cannot tell the format of: a usage error, nothing written.
    wrong = cobalt_here(cli_env, "run", "export", str(run_id), "--turns", "--out", "t.csv")
    assert wrong.returncode == 2 and "end the name with" in wrong.stderr


def test_the_run_table_per_turn_shows_pass_at_1_at_every_turn(
    sessions: sessionmaker[Session], cli_env: dict[str, str]
) -> None:
    run_id = stored_run(sessions)
    report = stored_report(sessions, run_id, ks=())
    shown = cobalt_here(cli_env, "run", "table", str(run_id), "--per-turn")
    assert shown.returncode == 0, shown.stderr
    header, row = shown.stdout.splitlines()[1:3]  # piped: tab-separated, after "# title"
    assert header.split("\t") == ["run", "turn 0 [95%]", "turn 1 [95%]", "turn 2 [95%]"]
    cells = row.split("\t")
    assert cells[0] == str(run_id) and len(cells) == 1 + report.turns
    assert report.pass_at_1 is not None and cells[1].startswith(f"{report.pass_at_1[0]:.3f} [")
    as_json = json.loads(
        cobalt_here(cli_env, "run", "table", str(run_id), "--per-turn", "--json").stdout
    )
    assert as_json["runs"] == [report.model_dump(mode="json")]
    refused = cobalt_here(cli_env, "run", "table", str(run_id), "--per-turn", "--out", "t.csv")
    assert refused.returncode == 2
