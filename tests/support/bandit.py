"""A synthetic stored run whose bandit contexts are worked out by hand (the docstring of
tests/orchestrator/bandit/test_builder.py walks through it)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.store import repo_datasets, repo_runs, repo_trajectories, repo_turns
from cobalt.orchestrator.store.models import Problem, Trajectory
from cobalt.orchestrator.store.models import Turn as TurnModel
from cobalt.orchestrator.store.repo_turns import TurnRow
from cobalt.shared.contracts.runs import RunParams

Turn = tuple[str, str] | None
LONG_ANSWER = "word " * 400
PROMPT = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]

RUN: dict[str, list[list[Turn]]] = {
    "p1": [
        [("AW", "WW"), ("AA", "WW"), ("AA", "AA")],
        [None, ("AA", "AA"), ("AA", "AA")],
        [("AA", "WW"), ("AW", "AW"), ("WA", "AW")],
        [("AW", "WW"), ("AA", "AW"), ("AW", "AA")],
        [("AA", "AW"), ("AA", "AA"), ("AA", "WA")],
        [("AA", "WW"), ("AA", "AA"), ("AA", "AA")],
        [("WA", "WW"), ("AA", "AA"), ("AA", "AA")],
    ],
    "p2": [[("AA", "AA")] * 3, [("AA", "AA")] * 3],
    "p3": [
        [("AA", "AA"), ("AA", "AA"), ("AA", "WW")],
        [("WW", "WW"), ("WW", "WW"), ("AA", "AA")],
    ],
}


def verdicts_of(flags: str) -> list[str]:
    return ["accepted" if f == "A" else "wrong_answer" for f in flags]


def stored_run(sessions: sessionmaker[Session]) -> tuple[int, dict[str, int]]:
    """The run above, finished and evaluated, as the loop and `evaluate` store it."""
    tests = [{"stdin": str(i), "expected_stdout": str(i)} for i in range(2)]
    with sessions.begin() as session:
        dataset = repo_datasets.create_dataset(session, name="toy", source="jsonl")
        repo_datasets.insert_problems(
            session,
            dataset_id=dataset.id,
            rows=[
                {
                    "external_id": name,
                    "statement": f"solve {name}",
                    "test_style": "stdin",
                    "public_tests": tests,
                    "hidden_tests": tests,
                }
                for name in RUN
            ],
        )
        ids = {p.external_id: p.id for p in session.scalars(select(Problem))}
        # A sample run with feedback turns: the same rows a refine run holds.
        run = repo_runs.create_run(
            session,
            kind="sample",
            dataset_id=dataset.id,
            base_url="http://model/v1",
            model="m",
            params=RunParams(n=7, turns=2, temperature=0.6, top_p=0.95),
            template_name="default",
            template_sha256="ab" * 32,
            total_trajectories=11,
        )
        keys = [(ids[p], s) for p, samples in RUN.items() for s in range(len(samples))]
        repo_trajectories.ensure_trajectories(session, run_id=run.id, keys=keys)
        rows = []
        for name, samples in RUN.items():
            for sample, turns in enumerate(samples):
                for index, turn in enumerate(turns):
                    public = verdicts_of(turn[0]) if turn else []
                    long = name == "p3" and sample == 1 and index == 1
                    rows.append(
                        TurnRow(
                            run_id=run.id,
                            problem_id=ids[name],
                            sample_index=sample,
                            turn_index=index,
                            messages=PROMPT if index == 0 else [],
                            raw_response=f"raw {name} {sample} {index}",
                            stored_response=LONG_ANSWER if long else f"answer {sample}.{index}",
                            code=None if turn is None else f"print({index})",
                            public_verdicts=public,
                            public_passed=turn is not None and turn[0] == "AA",
                            feedback=f"feedback {sample}.{index}",
                            model="m",
                        )
                    )
        repo_turns.insert_turns(session, rows=rows)
        for trajectory in session.scalars(select(Trajectory).where(Trajectory.run_id == run.id)):
            trajectory.status = "finished"
        repo_runs.set_run_status(session, run_id=run.id, status="finished")
        hidden = []
        for turn_id, problem_id, sample, index in session.execute(
            select(
                TurnModel.id,
                TurnModel.problem_id,
                TurnModel.sample_index,
                TurnModel.turn_index,
            ).where(TurnModel.run_id == run.id)
        ):
            name = next(n for n, i in ids.items() if i == problem_id)
            turn = RUN[name][sample][index]
            verdicts = verdicts_of(turn[1]) if turn else []
            hidden.append((turn_id, verdicts, turn is not None and turn[1] == "AA"))
        repo_turns.record_hidden_results(session, results=hidden)
    return run.id, ids
