"""A small, fully known experiment for the browse API and the web UI tests.

One dataset of three problems (one perturbed, one with a "/" in its id), a finished
sample run (n=2, 3 turns, evaluated, rewards scored, one hacking case judged), a running
second run, a bandit dataset with builder counts and a training job with three steps.
Pass patterns are fixed below, so every rate the pages show is known in advance.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.analysis.hacking import unified_diff
from cobalt.orchestrator.store import repo_bandit, repo_datasets, repo_runs, repo_training
from cobalt.orchestrator.store.models import (
    HackingCase,
    JudgeVerdict,
    Problem,
    TrainingStep,
    Turn,
    TurnReward,
)
from cobalt.orchestrator.store.repo_bandit import ContextRow
from cobalt.orchestrator.store.repo_runs import TurnRow

DATASET = "demo"
PROBLEMS = {
    "sum-two": ("easy", "Read two integers and print their sum. Mind negative numbers."),
    "double": ("medium", "Read an integer n and print twice its value, the doubling."),
    "lcb/reverse": ("hard", "Reverse the order of words in a sentence (palindrome check)."),
}
FINISHED_PASSES = {
    # problem -> per sample, per turn: does the program pass the hidden tests?
    "sum-two": [[False, True, True], [True, True, True]],
    "double": [[False, True, True], [False, True, True]],
    "lcb/reverse": [[False, False, False], [False, False, False]],
}
RUNNING_PASSES = {
    "sum-two": [[True, True], [True]],
    "double": [[False, True], [True]],
    "lcb/reverse": [[False], []],
}
FINISHED_PASS_AT_1 = [1 / 6, 2 / 3, 2 / 3]
"""Hidden Pass@1 per turn of the finished run (mean over problems of passing samples)."""
TRAINING_METRICS = [
    {"reward_mean": 0.1, "pass_rate": 0.2, "ppo_kl": 0.001, "pg_clipfrac": 0.05,
     "generate_seconds": 30.0, "execute_seconds": 4.0, "score_seconds": 1.0,
     "train_seconds": 20.0, "dropped_stale": 0.0},
    {"reward_mean": 0.3, "pass_rate": 0.35, "ppo_kl": 0.002, "pg_clipfrac": 0.07,
     "generate_seconds": 28.0, "execute_seconds": 4.5, "score_seconds": 1.1,
     "train_seconds": 21.0, "dropped_stale": 2.0},
    {"reward_mean": 0.45, "pass_rate": 0.5, "ppo_kl": 0.003, "pg_clipfrac": 0.06,
     "generate_seconds": 27.0, "execute_seconds": 4.2, "score_seconds": 1.0,
     "train_seconds": 20.5, "dropped_stale": 1.0},
]  # fmt: skip


@dataclass(frozen=True)
class Seeded:
    finished_run: int
    running_run: int
    training_job: int
    hacking_case: int


def program(problem: str, passes: bool, turn: int) -> str:
    body = {"sum-two": "a + b", "double": "2 * a", "lcb/reverse": "a[::-1]"}[problem]
    wrong = f"{body} + {turn + 1}"
    return f"a, b = 1, 2\nprint({body if passes else wrong})\n"


def response(problem: str, passes: bool, turn: int) -> str:
    reasoning = f"<think>Turn {turn}: consider the edge cases of {problem} carefully.</think>"
    return f"{reasoning}\nHere is my solution.\n```python\n{program(problem, passes, turn)}```\n"


def _turns(run_id: int, ids: dict[str, int], passes: dict[str, list[list[bool]]]) -> list[TurnRow]:
    rows = []
    for problem, samples in passes.items():
        for sample, outcomes in enumerate(samples):
            for turn, passed in enumerate(outcomes):
                verdict = "accepted" if passed else "wrong_answer"
                rows.append(
                    TurnRow(
                        run_id=run_id,
                        problem_id=ids[problem],
                        sample_index=sample,
                        turn_index=turn,
                        messages=[{"role": "user", "content": PROBLEMS[problem][1]}]
                        if turn == 0
                        else [],
                        raw_response=response(problem, passed, turn),
                        stored_response=response(problem, passed, turn),
                        code=program(problem, passed, turn),
                        public_verdicts=["accepted", verdict],
                        public_passed=passed,
                        feedback="" if passed else f"Test 2 failed: expected 3, got {turn + 4}.",
                        model="demo-model",
                        completion_tokens=100 + turn,
                    )
                )
    return rows


def seed(sessions: sessionmaker[Session]) -> Seeded:
    with sessions.begin() as session:
        dataset = repo_datasets.create_dataset(session, name=DATASET, source="jsonl")
        test = [{"stdin": "1 2", "expected_stdout": "3"}, {"stdin": "2 2", "expected_stdout": "4"}]
        repo_datasets.insert_problems(
            session,
            dataset_id=dataset.id,
            rows=[
                {"external_id": name, "statement": statement, "test_style": "stdin",
                 "public_tests": test, "hidden_tests": test, "difficulty": difficulty}
                for name, (difficulty, statement) in PROBLEMS.items()
            ],
        )  # fmt: skip
        ids = {
            p.external_id: p.id
            for p in session.scalars(select(Problem).where(Problem.dataset_id == dataset.id))
        }
        session.get_one(Problem, ids["double"]).perturbation = {
            "swapped": [{"new_index": 1, "original_index": 1}]
        }
        finished = _run(session, dataset.id, ids, FINISHED_PASSES, turns=2, status="finished")
        running = _run(session, dataset.id, ids, RUNNING_PASSES, turns=1, status="running")
        case = _hacking_case(session, finished, ids["double"])
        _rewards(session, finished)
        job = _training(session, finished, ids["double"])
    return Seeded(finished_run=finished, running_run=running, training_job=job, hacking_case=case)


def _run(
    session: Session,
    dataset_id: int,
    ids: dict[str, int],
    passes: dict[str, list[list[bool]]],
    *,
    turns: int,
    status: str,
) -> int:
    run = repo_runs.create_run(
        session, kind="sample", dataset_id=dataset_id, base_url="http://model/v1",
        model="demo-model", params={"n": 2, "turns": turns, "temperature": 0.6},
        template_name="default", template_sha256="ab" * 32, total_trajectories=6,
    )  # fmt: skip
    repo_runs.ensure_trajectories(
        session, run_id=run.id, keys=[(ids[p], s) for p in passes for s in range(2)]
    )
    repo_runs.insert_turns(session, rows=_turns(run.id, ids, passes))
    for problem, samples in passes.items():
        for sample, outcomes in enumerate(samples):
            done = len(outcomes) == turns + 1 or status == "finished"
            for moved_to in ("running", "finished") if done else ("running",):
                repo_runs.mark_trajectory(
                    session, run_id=run.id, problem_id=ids[problem], sample_index=sample,
                    status=moved_to, turns_done=len(outcomes),
                )  # fmt: skip
    repo_runs.record_hidden_results(
        session,
        results=[
            (turn.id, turn.public_verdicts, turn.public_passed)
            for turn in session.scalars(select(Turn).where(Turn.run_id == run.id))
        ],
    )
    repo_runs.set_run_status(session, run_id=run.id, status="running")
    if status != "running":
        repo_runs.set_run_status(session, run_id=run.id, status=status)
    return run.id


def _rewards(session: Session, run_id: int) -> None:
    for turn in session.scalars(select(Turn).where(Turn.run_id == run_id)):
        value = 1.0 if turn.hidden_passed else 0.0
        session.add(
            TurnReward(
                turn_id=turn.id, run_id=run_id, turn_index=turn.turn_index, tokenizer="demo",
                total=value, total_before_clip=value, validation_reward=value, pass_rate=value,
                prev_best=0.0, tests_passed=int(value) * 4, tests_total=4, no_code=False,
                correctness=value, improvement=0.0, format=0.0, format_violations=[],
            )
        )  # fmt: skip


def _hacking_case(session: Session, run_id: int, problem_id: int) -> int:
    before, after = program("double", False, 0), program("double", True, 1)
    case = HackingCase(
        run_id=run_id, problem_id=problem_id, sample_index=1, turn_index=1, shown_test=1,
        swapped_tests=[1], previous_code=before, feedback="Test 2 failed: expected 3, got 4.",
        new_code=after, diff=unified_diff(before, after), hidden_pass_before=0.0,
        hidden_pass_after=1.0,
    )  # fmt: skip
    session.add(case)
    session.flush()
    session.add(
        JudgeVerdict(
            case_id=case.id, judge_model="judge-model", category="1", raw_answer="CATEGORY: 1"
        )
    )
    return case.id


def _training(session: Session, run_id: int, problem_id: int) -> int:
    bandit = repo_bandit.create_bandit_dataset(
        session, name="demo-contexts", source_run_id=run_id, split="train", params={"keep": 2},
        counts={"problems": 3, "problems_all_pass_at_turn_0": 0, "trajectories": 6,
                "not_candidates": 2, "dropped_over_token_cap": 1, "turn_0_contexts": 2,
                "partial_contexts": 1, "mixed_in": {}},
        contexts=[
            ContextRow(problem_id=problem_id, source_run_id=run_id, trajectory_id=None,
                       assistant_turns=turns, messages=[{"role": "user", "content": "Double n."}],
                       prev_best=best, prompt_tokens=12, template_sha256="ab" * 32)
            for turns, best in ((0, 0.0), (1, 0.5), (0, 0.0))
        ],
    )  # fmt: skip
    job = repo_training.create_job(
        session, name="demo-grpo", mode="cobalt", model="/models/policy",
        bandit_dataset_id=bandit.id, params={"trainer": {"contexts_per_step": 2}},
    )  # fmt: skip
    for step, metrics in enumerate(TRAINING_METRICS, start=1):
        session.add(TrainingStep(job_id=job.id, step=step, policy_version=step, metrics=metrics))
    job.step, job.policy_version, job.status = 3, 3, "running"
    return job.id


def add_turn(sessions: sessionmaker[Session], run_id: int) -> None:
    """One more turn on the running run (what a worker writes): the UI must show it."""
    with sessions.begin() as session:
        problem_id = session.scalars(
            select(Problem.id).where(Problem.external_id == "lcb/reverse")
        ).one()
        row = _turns(run_id, {"lcb/reverse": problem_id}, {"lcb/reverse": [[], [False]]})
        repo_runs.insert_turns(session, rows=row)
