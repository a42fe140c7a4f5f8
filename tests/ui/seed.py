"""A small, fully known experiment for the browse API and the web UI tests.

One dataset of three problems (one perturbed, one with a "/" in its id), a finished
sample run (n=2, 3 turns, evaluated, rewards scored, one hacking case judged, per-test
outputs stored), a running second run, a bandit dataset with builder counts, a training
job with three steps and the ledger groups of two, a third run of the same dataset after
training (policy version 3), and a running training job silent for two hours.
Pass patterns are fixed below, so every rate the pages show is known in advance.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.analysis.hacking import unified_diff
from cobalt.orchestrator.bandit.builder import BuildOptions
from cobalt.orchestrator.store import (
    repo_bandit,
    repo_datasets,
    repo_runs,
    repo_training,
    repo_trajectories,
    repo_turns,
)
from cobalt.orchestrator.store.models import (
    HackingCase,
    JudgeVerdict,
    Problem,
    TrainingGroup,
    TrainingJob,
    TrainingStep,
    Turn,
    TurnReward,
)
from cobalt.orchestrator.store.repo_bandit import ContextRow
from cobalt.orchestrator.store.repo_policy import record_run_policy
from cobalt.orchestrator.store.repo_training import SampleRow
from cobalt.orchestrator.store.repo_turns import TurnRow
from cobalt.shared.contracts.hyperparameters import TrainingMode
from cobalt.shared.contracts.runs import RunParams
from cobalt.shared.contracts.training_params import training_params
from cobalt.shared.contracts.weights import WeightsIdentity
from cobalt.shared.reward import RewardBreakdown

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
TRAINED_PASSES = {
    # The same dataset after training (policy version 3). With two samples, only 0/2 <->
    # 2/2 is beyond the noise (analysis.statistics): lcb/reverse fixed at every turn
    # (0/2 -> 2/2), sum-two broken at turn 2 (2/2 -> 0/2); sum-two at turn 0 (1/2 -> 2/2)
    # and double at turn 1 (2/2 -> 1/2) moved within their noise.
    "sum-two": [[True, True, False], [True, True, False]],
    "double": [[False, False, True], [False, True, True]],
    "lcb/reverse": [[True, True, True], [True, True, True]],
}
TRAINED_PASS_AT_1 = [2 / 3, 5 / 6, 2 / 3]
TRAINED_POLICY_VERSION = 3
CHANGE_COUNTS = [
    # per turn: finished run (A) -> trained run (B)
    {"fixed": 1, "broken": 0, "unchanged": 1, "within_noise": 1, "unevaluated": 0},
    {"fixed": 1, "broken": 0, "unchanged": 1, "within_noise": 1, "unevaluated": 0},
    {"fixed": 1, "broken": 1, "unchanged": 1, "within_noise": 0, "unevaluated": 0},
]
RUNTIME_ERROR = (
    'Traceback (most recent call last):\n  File "main.py", line 2\n'
    "IndexError: list index out of range"
)
"""stderr of lcb/reverse's failing programs (their second test is a runtime error)."""
STEP_GROUPS = {
    # step -> one group's rewards per sample (the ledger of the seeded training job)
    1: [1.0, 0.0, 0.5, 0.5],
    2: [0.25, 0.25, 0.25, 0.25],
}
TRAINING_METRICS = [
    {"reward_mean": 0.1, "pass_rate": 0.2, "ppo_kl": 0.001, "pg_clipfrac": 0.05,
     "generate_seconds": 30.0, "execute_seconds": 4.0, "score_seconds": 1.0,
     "train_seconds": 20.0, "dropped_stale": 0.0, "entropy": 0.9},
    {"reward_mean": 0.3, "pass_rate": 0.35, "ppo_kl": 0.002, "pg_clipfrac": 0.07,
     "generate_seconds": 28.0, "execute_seconds": 4.5, "score_seconds": 1.1,
     "train_seconds": 21.0, "dropped_stale": 2.0, "entropy": 0.85},
    {"reward_mean": 0.45, "pass_rate": 0.5, "ppo_kl": 0.003, "pg_clipfrac": 0.06,
     "generate_seconds": 27.0, "execute_seconds": 4.2, "score_seconds": 1.0,
     "train_seconds": 20.5, "dropped_stale": 1.0, "entropy": 0.8},
]  # fmt: skip


@dataclass(frozen=True)
class Seeded:
    finished_run: int
    running_run: int
    training_job: int
    hacking_case: int
    trained_run: int = 0
    stale_job: int = 0
    finished_job: int = 0


def program(problem: str, passes: bool, turn: int) -> str:
    body = {"sum-two": "a + b", "double": "2 * a", "lcb/reverse": "a[::-1]"}[problem]
    wrong = f"{body} + {turn + 1}"
    return f"a, b = 1, 2\nprint({body if passes else wrong})\n"


def response(problem: str, passes: bool, turn: int) -> str:
    reasoning = f"<think>Turn {turn}: consider the edge cases of {problem} carefully.</think>"
    return f"{reasoning}\nHere is my solution.\n```python\n{program(problem, passes, turn)}```\n"


def failing_verdict(problem: str) -> str:
    return "runtime_error" if problem == "lcb/reverse" else "wrong_answer"


def seeded_outputs(problem: str, passes: bool, turn: int) -> list[dict[str, object]]:
    """What the seeded programs print on the two tests (the second fails unless `passes`)."""
    first = {"stdout": "3\n", "stderr": "", "exit_code": 0, "wall_ms": 12.0}
    if passes:
        return [first, {"stdout": "4\n", "stderr": "", "exit_code": 0, "wall_ms": 11.0}]
    if failing_verdict(problem) == "runtime_error":
        return [first, {"stdout": "", "stderr": RUNTIME_ERROR, "exit_code": 1, "wall_ms": 9.0}]
    return [first, {"stdout": f"{turn + 4}\n", "stderr": "", "exit_code": 0, "wall_ms": 10.0}]


def _turns(
    run_id: int,
    ids: dict[str, int],
    passes: dict[str, list[list[bool]]],
    policy_version: int | None = None,
) -> list[TurnRow]:
    rows = []
    for problem, samples in passes.items():
        for sample, outcomes in enumerate(samples):
            for turn, passed in enumerate(outcomes):
                verdict = "accepted" if passed else failing_verdict(problem)
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
                        policy_version=policy_version,
                        public_outputs=seeded_outputs(problem, passed, turn),
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
        trained = _run(
            session, dataset.id, ids, TRAINED_PASSES, turns=2, status="finished",
            policy_version=TRAINED_POLICY_VERSION,
        )  # fmt: skip
        # The trained run was evaluated with the job's last checkpoint (provenance).
        record_run_policy(session, run_id=trained, policy=checkpoint_of(job, 3))
        stale = _stale_job(session, job)
        done = _finished_job(session, job)
    return Seeded(
        finished_run=finished, running_run=running, training_job=job, hacking_case=case,
        trained_run=trained, stale_job=stale, finished_job=done,
    )  # fmt: skip


def checkpoint_of(job_id: int, step: int) -> WeightsIdentity:
    """The checkpoint a seeded training step published (a directory no machine has)."""
    return WeightsIdentity(
        kind="full", path=f"/checkpoints/job-{job_id}/step-{step}/policy",
        digest=f"{step:02x}" * 32, job=job_id, step=step, version=step,
    )  # fmt: skip


def _run(
    session: Session,
    dataset_id: int,
    ids: dict[str, int],
    passes: dict[str, list[list[bool]]],
    *,
    turns: int,
    status: str,
    policy_version: int | None = None,
    parent_run_id: int | None = None,
    evaluated: bool = True,
) -> int:
    run = repo_runs.create_run(
        session, kind="sample" if parent_run_id is None else "refine", dataset_id=dataset_id,
        base_url="http://model/v1", model="demo-model",
        params=RunParams(n=2, turns=turns, temperature=0.6), template_name="default",
        template_sha256="ab" * 32, total_trajectories=6, parent_run_id=parent_run_id,
    )  # fmt: skip
    repo_trajectories.ensure_trajectories(
        session, run_id=run.id, keys=[(ids[p], s) for p in passes for s in range(2)]
    )
    repo_turns.insert_turns(session, rows=_turns(run.id, ids, passes, policy_version))
    for problem, samples in passes.items():
        for sample, outcomes in enumerate(samples):
            done = len(outcomes) == turns + 1 or status == "finished"
            for moved_to in ("running", "finished") if done else ("running",):
                repo_trajectories.mark_trajectory(
                    session, run_id=run.id, problem_id=ids[problem], sample_index=sample,
                    status=moved_to, turns_done=len(outcomes),
                )  # fmt: skip
    stored = session.scalars(select(Turn).where(Turn.run_id == run.id)).all() if evaluated else []
    repo_turns.record_hidden_results(
        session,
        results=[(turn.id, turn.public_verdicts, turn.public_passed) for turn in stored],
        outputs={turn.id: turn.public_outputs or [] for turn in stored},
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
        session, name="demo-contexts", source_run_id=run_id, split="train",
        params=BuildOptions(keep=2).as_params(),
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
        session, name="demo-grpo", model="/models/policy", bandit_dataset_id=bandit.id,
        params=training_params(TrainingMode.COBALT, {"trainer": {"contexts_per_step": 2}}),
    )  # fmt: skip
    for step, metrics in enumerate(TRAINING_METRICS, start=1):
        session.add(
            TrainingStep(job_id=job.id, step=step, policy_version=step, metrics=metrics,
                         checkpoint=checkpoint_of(job.id, step).model_dump(mode="json"))
        )  # fmt: skip
    for step, rewards in STEP_GROUPS.items():
        repo_training.record_group(
            session, job_id=job.id, context_key=f"bandit:{step}", round=step,
            problem_id=problem_id, policy_version=step - 1, phase_seconds={"generate": 2.0},
            samples=[_ledger_sample(i, reward) for i, reward in enumerate(rewards)],
        )  # fmt: skip
        session.execute(
            update(TrainingGroup)
            .where(TrainingGroup.job_id == job.id, TrainingGroup.round == step)
            .values(status="consumed", step=step)
        )
    job.step, job.policy_version, job.status = 3, 3, "running"
    return job.id


def _ledger_sample(index: int, reward: float) -> SampleRow:
    value = RewardBreakdown(
        total=reward, total_before_clip=reward, validation_reward=reward, pass_rate=reward,
        prev_best=0.0, tests_passed=int(reward * 4), tests_total=4, no_code=False,
    )  # fmt: skip
    return SampleRow(
        sample_index=index, response=f"<think>try {index}</think>\nprint(2 * n)  # sample {index}",
        prompt_token_ids=[1, 2, 3], response_token_ids=list(range(10 + index)),
        response_logprobs=[-0.5] * (10 + index), verdicts=["accepted", "wrong_answer"],
        reward=value,
    )  # fmt: skip


def _silent_job(session: Session, job_id: int, name: str, params: dict[str, Any]) -> TrainingJob:
    """A job on `job_id`'s contexts, created and last changed two hours ago."""
    job = session.get_one(TrainingJob, job_id)
    silent = repo_training.create_job(
        session, name=name, model="/models/policy", bandit_dataset_id=job.bandit_dataset_id,
        params=training_params(TrainingMode.COBALT, params),
    )  # fmt: skip
    session.flush()
    long_ago = datetime.now(UTC) - timedelta(hours=2)
    silent.created_at = silent.updated_at = long_ago
    return silent


def _stale_job(session: Session, job_id: int) -> int:
    """A running job whose trainer last reported two hours ago: shown as stale."""
    stale = _silent_job(session, job_id, "silent-grpo", {})
    stale.status = "running"
    session.flush()
    return stale.id


def _finished_job(session: Session, job_id: int) -> int:
    """A job that spent its budget of 3 steps two hours ago: finished, never stale."""
    done = _silent_job(session, job_id, "budgeted-grpo", {"max_steps": 3})
    done.status, done.step, done.policy_version = "finished", 3, 3
    session.flush()
    return done.id


def add_turn(sessions: sessionmaker[Session], run_id: int) -> None:
    """One more turn on the running run (what a worker writes): the UI must show it."""
    with sessions.begin() as session:
        problem_id = session.scalars(
            select(Problem.id).where(Problem.external_id == "lcb/reverse")
        ).one()
        row = _turns(run_id, {"lcb/reverse": problem_id}, {"lcb/reverse": [[], [False]]})
        repo_turns.insert_turns(session, rows=row)


def add_run(
    sessions: sessionmaker[Session],
    passes: dict[str, list[list[bool]]],
    *,
    turns: int,
    parent_run_id: int | None = None,
    evaluated: bool = True,
) -> int:
    """One more finished run of the demo dataset (a refine run when it has a parent)."""
    with sessions.begin() as session:
        ids = {
            p.external_id: p.id
            for p in session.scalars(select(Problem).where(Problem.external_id.in_(PROBLEMS)))
        }
        dataset_id = session.get_one(Problem, ids["double"]).dataset_id
        return _run(
            session, dataset_id, ids, passes, turns=turns, status="finished",
            parent_run_id=parent_run_id, evaluated=evaluated,
        )  # fmt: skip
