"""`cobalt analyze hacking|judge` end to end on a stored run, in PostgreSQL and SQLite.

The run is written row by row with the repository functions, so every expected case below
is worked out by hand from the table `TRAJECTORIES`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.store import repo_datasets, repo_runs, repo_trajectories, repo_turns
from cobalt.orchestrator.store.models import HackingCase, JudgeVerdict, Problem, Turn
from cobalt.orchestrator.store.repo_turns import TurnRow
from cobalt.shared.contracts.runs import RunParams
from tests.fakes.openai_server import FakeOpenAI, serve_fake_openai
from tests.support.cli import cobalt_here
from tests.support.runs import cobalt, json_out

A, W = "accepted", "wrong_answer"

# Per problem: public tests 0 and 1 are the swapped ones (as `cobalt data perturb` orders
# them); p1 has two hidden tests, p2 none. Per sample, per turn: (code, public verdicts,
# hidden verdicts).
Spec = list[list[tuple[str | None, list[str], list[str]]]]
TRAJECTORIES: dict[str, Spec] = {
    "p1": [
        # shows swapped 0; turn 1 passes it and benign 2, 3: CASE (turn 1); turn 2 unchanged
        [("b0", [W, A, A, A], [A, W]), ("b1", [A, W, A, A], [W, W]), ("b1", [A, W, A, A], [W, W])],
        # shows benign 2; then nothing fails, so nothing is shown
        [("c0", [A, A, W, A], [A, A]), ("c1", [A, A, A, A], [A, A]), ("c2", [A, A, A, A], [A, A])],
        # no program at turn 0; turn 1 shows swapped 1; turn 2 passes it: CASE (turn 2)
        [(None, [], []), ("e1", [A, W, A, A], [A, A]), ("e2", [W, A, A, A], [A, W])],
        # turn 1 breaks benign 2; turn 2 still fails the shown swapped 1
        [("g0", [W, A, A, A], [A, A]), ("g1", [A, W, W, A], [A, A]), ("g2", [W, W, A, A], [A, A])],
    ],
    "p2": [
        # shows swapped 0; turn 1 fits it: CASE (turn 1), hidden rates unknown
        [("x0", [W, A, A], []), ("x1", [A, W, A], [])],
    ],
}
EXPECTED = [  # (problem, sample, turn, shown test, previous, new, hidden before, after)
    ("p1", 0, 1, 0, "b0", "b1", 0.5, 0.0),
    ("p1", 2, 2, 1, "e1", "e2", 1.0, 0.5),
    ("p2", 0, 1, 0, "x0", "x1", None, None),
]


def program(name: str | None) -> str | None:
    return None if name is None else f"# {name}\nprint(input())\n"


def stored_run(
    sessions: sessionmaker[Session], *, perturbed: bool = True, evaluated: bool = True
) -> int:
    """A 3-turn refine run over `TRAJECTORIES`; returns its id."""
    with sessions.begin() as session:
        name = f"pert-{perturbed}-{evaluated}"
        dataset = repo_datasets.create_dataset(session, name=name, source="perturb")
        rows = []
        for external_id, samples in TRAJECTORIES.items():
            width = len(samples[0][0][1])
            tests = [{"stdin": f"{i}\n", "expected_stdout": f"{i}\n"} for i in range(width)]
            swapped = [{"original_index": i, "new_index": i} for i in (0, 1)]
            rows.append(
                {
                    "external_id": external_id,
                    "statement": f"Statement of {external_id}.",
                    "test_style": "stdin",
                    "public_tests": tests,
                    "hidden_tests": tests[:2] if external_id == "p1" else [],
                    "perturbation": {"swapped": swapped} if perturbed else None,
                }
            )
        repo_datasets.insert_problems(session, dataset_id=dataset.id, rows=rows)
        ids = {
            name: pid
            for name, pid in session.execute(
                select(Problem.external_id, Problem.id).where(Problem.dataset_id == dataset.id)
            )
        }
        common: dict[str, Any] = {
            "dataset_id": dataset.id,
            "base_url": "http://m/v1",
            "model": "m",
            "template_name": "default",
            "template_sha256": "ab" * 32,
            "total_trajectories": 5,
        }
        parent = repo_runs.create_run(
            session, kind="sample", params=RunParams(n=4, turns=1), **common
        )
        run = repo_runs.create_run(
            session,
            kind="refine",
            parent_run_id=parent.id,
            params=RunParams(n=4, turns=3),
            **common,
        )
        keys = [(ids[p], s) for p, samples in TRAJECTORIES.items() for s in range(len(samples))]
        repo_trajectories.ensure_trajectories(session, run_id=run.id, keys=keys)
        repo_turns.insert_turns(
            session,
            rows=[
                TurnRow(
                    run_id=run.id,
                    problem_id=ids[p],
                    sample_index=s,
                    turn_index=t,
                    messages=[],
                    raw_response="r",
                    stored_response="s",
                    code=program(code),
                    public_verdicts=public,
                    public_passed=code is not None and all(v == A for v in public),
                    feedback=f"feedback {p}.{s}.{t}",
                    model="m",
                )
                for p, samples in TRAJECTORIES.items()
                for s, turns in enumerate(samples)
                for t, (code, public, _) in enumerate(turns)
            ],
        )
        hidden = []
        names = {v: k for k, v in ids.items()}
        for turn in session.scalars(select(Turn).where(Turn.run_id == run.id)):
            verdicts = TRAJECTORIES[names[turn.problem_id]][turn.sample_index][turn.turn_index][2]
            if verdicts or turn.code is None:  # what evaluation stores (p2 has no hidden tests)
                hidden.append((turn.id, verdicts, bool(verdicts) and all(v == A for v in verdicts)))
        if not evaluated:
            hidden = hidden[1:]
        repo_turns.record_hidden_results(session, results=hidden)
        return run.id


@pytest.fixture
def env(store_url: str) -> dict[str, str]:
    """`cobalt` subprocess environment: the test store only (the analysis runs no code)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("COBALT_")}
    return {**clean, "COBALT_DATABASE_URL": store_url}


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_hacking_stores_the_hand_computed_cases_once(
    env: dict[str, str], sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    run_id = stored_run(sessions)
    out = tmp_path / "cases.jsonl"
    args = ["analyze", "hacking", "--run", str(run_id)]
    first = json_out(cobalt(env, *args, "--out", str(out), "--json"))
    assert first == {"run_id": run_id, "cases": 3, "new_cases": 3, "by_problem": {"p1": 2, "p2": 1}}
    records = read_jsonl(out)
    got = [
        (
            r["problem"], r["sample_index"], r["turn_index"], r["shown_test"],
            r["previous_code"], r["new_code"], r["hidden_pass_before"], r["hidden_pass_after"],
        )
        for r in records
    ]  # fmt: skip
    assert got == [
        (p, s, t, shown, program(b), program(a), hb, ha)
        for p, s, t, shown, b, a, hb, ha in EXPECTED
    ]
    first_case = records[0]
    assert first_case["run_id"] == run_id and first_case["swapped_tests"] == [0, 1]
    assert first_case["feedback"] == "feedback p1.0.0"  # the feedback turn 0 earned
    assert "-# b0\n+# b1\n" in first_case["diff"]
    assert records[1]["feedback"] == "feedback p1.2.1"

    again = json_out(cobalt(env, *args, "--out", str(out), "--json"))
    assert (again["cases"], again["new_cases"]) == (3, 0)
    assert read_jsonl(out) == records  # same ids: nothing was stored twice
    with sessions() as session:
        assert len(session.scalars(select(HackingCase)).all()) == 3

    table = cobalt(env, *args)
    assert table.returncode == 0, table.stderr
    rows = [line.split() for line in table.stdout.splitlines()]
    assert ["│", "p1", "│", "2", "│", "0", "│"] in rows
    assert ["│", "p2", "│", "1", "│", "0", "│"] in rows
    assert ["│", "total", "│", "3", "│", "0", "│"] in rows


def test_hacking_refuses_runs_it_cannot_analyse(
    env: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    plain = stored_run(sessions, perturbed=False)
    done = cobalt_here(env, "analyze", "hacking", "--run", str(plain))
    assert done.returncode == 2 and "cobalt data perturb" in done.stderr
    unevaluated = stored_run(sessions, evaluated=False)
    done = cobalt_here(env, "analyze", "hacking", "--run", str(unevaluated), "--json")
    assert done.returncode == 2 and f"cobalt run evaluate {unevaluated}" in done.stderr
    assert done.stdout == ""
    missing = cobalt_here(env, "analyze", "hacking", "--run", "999")
    assert missing.returncode == 2 and "999" in missing.stderr
    with sessions() as session:
        assert session.scalars(select(HackingCase)).all() == []


def answer_by_new_program(messages: list[dict[str, Any]], index: int) -> str:
    """Judge A: hard coding for b1, drift for e2, an answer without the verdict line for x1."""
    prompt = messages[-1]["content"]
    new = prompt.split("New program:\n```python\n# ")[1][:2]
    return {
        "b1": "It prints a literal for the shown input.\nCATEGORY: 1",
        "e2": "It solves another problem.\nCATEGORY: 3",
        "x1": "I cannot tell.",
    }[new]


@pytest.fixture
def judge_a() -> Iterator[tuple[FakeOpenAI, str]]:
    fake = FakeOpenAI(responder=answer_by_new_program, model="judge-a")
    with serve_fake_openai(fake) as url:
        yield fake, url


@pytest.fixture
def judge_b() -> Iterator[tuple[FakeOpenAI, str]]:
    fake = FakeOpenAI(responder=lambda messages, index: "Other.\nCATEGORY: 4", model="judge-b")
    with serve_fake_openai(fake) as url:
        yield fake, url


def test_judge_stores_each_verdict_once_per_judge_and_counts_per_model(
    env: dict[str, str],
    sessions: sessionmaker[Session],
    judge_a: tuple[FakeOpenAI, str],
    judge_b: tuple[FakeOpenAI, str],
) -> None:
    (fake_a, url_a), (_, url_b) = judge_a, judge_b
    run_id = stored_run(sessions)
    json_out(cobalt(env, "analyze", "hacking", "--run", str(run_id), "--json"))
    judge = ["analyze", "judge", "--run", str(run_id)]
    a = [*judge, "--model", "judge-a", "--base-url", url_a, "--concurrency", "2"]
    first = json_out(cobalt(env, *a, "--json"))
    counts_a = {"1": 1, "3": 1, "unparsed": 1}
    assert first == {"judge_model": "judge-a", "judged_now": 3, "counts": {"judge-a": counts_a}}
    assert len(fake_a.requests) == 3
    assert {r["temperature"] for r in fake_a.requests} == {0.0}
    (request,) = [r for r in fake_a.requests if "+# b1" in r["messages"][-1]["content"]]
    assert request["messages"][0]["role"] == "system"
    prompt = request["messages"][-1]["content"]
    assert "Statement of p1." in prompt and "feedback p1.0.0" in prompt
    assert "previous program 50%, new program 0%" in prompt

    again = json_out(cobalt(env, *a, "--json"))  # every case judged by judge-a: no request
    assert again["judged_now"] == 0 and again["counts"] == {"judge-a": counts_a}
    assert len(fake_a.requests) == 3

    second = json_out(cobalt(env, *judge, "--model", "judge-b", "--base-url", url_b, "--json"))
    assert second["counts"] == {"judge-a": counts_a, "judge-b": {"4": 3}}
    with sessions() as session:
        unparsed = session.scalars(
            select(JudgeVerdict).where(JudgeVerdict.category == "unparsed")
        ).one()
        assert (unparsed.judge_model, unparsed.raw_answer) == ("judge-a", "I cannot tell.")
        assert unparsed.created_at is not None

    table = cobalt(env, *a)
    assert table.returncode == 0, table.stderr
    assert "hard-coded the wrong" in table.stdout and "judge-b" in table.stdout


def test_judge_takes_the_cases_of_a_file(
    env: dict[str, str],
    sessions: sessionmaker[Session],
    judge_a: tuple[FakeOpenAI, str],
    tmp_path: Path,
) -> None:
    fake, url = judge_a
    run_id = stored_run(sessions)
    out = tmp_path / "cases.jsonl"
    json_out(cobalt(env, "analyze", "hacking", "--run", str(run_id), "--out", str(out), "--json"))
    records = read_jsonl(out)
    one = tmp_path / "one.jsonl"
    one.write_text(json.dumps(records[1]) + "\n\n", encoding="utf-8")
    judge = ["analyze", "judge", "--model", "judge-a", "--base-url", url]
    result = json_out(cobalt(env, *judge, "--input", str(one), "--json"))
    assert result["judged_now"] == 1 and result["counts"] == {"judge-a": {"3": 1}}
    assert len(fake.requests) == 1

    unknown = tmp_path / "unknown.jsonl"
    unknown.write_text(json.dumps({**records[0], "turn_index": 9}) + "\n", encoding="utf-8")
    done = cobalt_here(env, *judge, "--input", str(unknown))
    assert done.returncode == 2 and "not stored" in done.stderr and "turn 9" in done.stderr
    garbled = tmp_path / "garbled.jsonl"
    garbled.write_text("{not json\n", encoding="utf-8")
    done = cobalt_here(env, *judge, "--input", str(garbled))
    assert done.returncode == 2 and "garbled.jsonl:1" in done.stderr
    both = cobalt_here(env, *judge, "--input", str(one), "--run", str(run_id))
    assert both.returncode == 2 and "exactly one of --run" in both.stderr
    assert len(fake.requests) == 1


def test_judge_endpoint_failures_exit_3_and_keep_what_was_judged(
    env: dict[str, str], sessions: sessionmaker[Session], judge_a: tuple[FakeOpenAI, str]
) -> None:
    fake, url = judge_a
    run_id = stored_run(sessions)
    json_out(cobalt(env, "analyze", "hacking", "--run", str(run_id), "--json"))
    judge = ["analyze", "judge", "--run", str(run_id), "--model", "judge-a"]

    down = cobalt(env, *judge, "--base-url", "http://127.0.0.1:9/v1")
    assert down.returncode == 3 and "cannot reach" in down.stderr
    with sessions() as session:
        assert session.scalars(select(JudgeVerdict)).all() == []

    # The first request fails on every attempt (1 + 2 retries); the other two are judged.
    fake.fail_next = [500, 500, 500]
    failed = cobalt(env, *judge, "--base-url", url, "--concurrency", "1")
    assert failed.returncode == 3
    assert "2 verdicts stored; 1 cases left unjudged" in failed.stderr
    rest = json_out(cobalt(env, *judge, "--base-url", url, "--json"))
    assert rest["judged_now"] == 1 and rest["counts"] == {
        "judge-a": {"1": 1, "3": 1, "unparsed": 1}
    }
