"""The perturbation rule (docs/method.md, "Data"), on test lists and on stored datasets."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.datasets.perturb import (
    PERTURBATION_RULE,
    perturb_dataset,
    perturb_tests,
    problem_rng,
)
from cobalt.orchestrator.store import repo_datasets
from cobalt.shared.errors import Conflict, NotFound


def stdin_tests(*outputs: str) -> list[dict[str, Any]]:
    return [{"stdin": f"in{i}", "expected_stdout": out} for i, out in enumerate(outputs)]


def call_tests(*expected: Any) -> list[dict[str, Any]]:
    return [
        {"fn_name": "f", "args": [i], "kwargs": {}, "expected": e} for i, e in enumerate(expected)
    ]


def check_invariants(original: list[dict[str, Any]], seed: int, external_id: str) -> None:
    """Every property the rule promises, for one problem."""
    before = json.loads(json.dumps(original))
    result = perturb_tests(original, seed=seed, external_id=external_id)
    assert original == before  # the input is not modified
    assert result is not None
    record = result.perturbation
    assert record["rule"] == PERTURBATION_RULE and record["seed"] == seed
    order = record["order"]
    assert sorted(order) == list(range(len(original)))
    swapped = record["swapped"]
    assert [item["new_index"] for item in swapped] == [0, 1]  # the swapped pair comes first
    a, b = (item["original_index"] for item in swapped)
    assert order[:2] == [a, b]
    key = swapped[0]["field"]
    # The pair had distinct outputs and they were exchanged.
    if key == "expected_stdout":
        assert original[a][key].strip() != original[b][key].strip()
    else:
        assert json.dumps(original[a][key]) != json.dumps(original[b][key])
    assert result.public_tests[0][key] == original[b][key]
    assert result.public_tests[1][key] == original[a][key]
    assert [item["before"] for item in swapped] == [original[a][key], original[b][key]]
    assert [item["after"] for item in swapped] == [original[b][key], original[a][key]]
    # Inputs stay with their tests; every other test is untouched, in shuffled order.
    for position, index in enumerate(order):
        test = result.public_tests[position]
        expected_test = dict(original[index])
        if position < 2:
            expected_test[key] = original[b if position == 0 else a][key]
        assert test == expected_test
    # Exactly two tests differ from the original test at the same input.
    changed = [p for p, index in enumerate(order) if result.public_tests[p] != original[index]]
    assert changed == [0, 1]


@pytest.mark.parametrize("seed", range(20))
def test_stdin_invariants(seed: int) -> None:
    check_invariants(stdin_tests("1", "1", "2", "3", "3\n"), seed, "p1")


@pytest.mark.parametrize("seed", range(20))
def test_call_invariants(seed: int) -> None:
    check_invariants(call_tests([1], [1], {"a": 1}, [1, 2], None), seed, "p1")


def test_outputs_equal_after_stripping_are_not_distinct() -> None:
    # Two distinct raw strings, but the same stripped output: nothing to swap.
    assert perturb_tests(stdin_tests("4", " 4\n", "4"), seed=0, external_id="x") is None


def test_swapped_stdin_values_keep_their_exact_text() -> None:
    for seed in range(10):
        result = perturb_tests(stdin_tests("1\n", " 2 "), seed=seed, external_id="x")
        assert result is not None
        assert sorted(t["expected_stdout"] for t in result.public_tests) == [" 2 ", "1\n"]
        assert {t["stdin"]: t["expected_stdout"] for t in result.public_tests} == {
            "in0": " 2 ",
            "in1": "1\n",
        }


def test_call_values_compare_as_json() -> None:
    # 1 and 1.0 dump differently; [1] and [1] do not.
    assert perturb_tests(call_tests([1], [1]), seed=0, external_id="x") is None
    assert perturb_tests(call_tests(1, 1.0), seed=0, external_id="x") is not None
    assert (
        perturb_tests(call_tests({"a": 1, "b": 2}, {"b": 2, "a": 1}), seed=0, external_id="x")
        is None
    )


@pytest.mark.parametrize(
    "tests",
    [
        [],
        stdin_tests("7"),
        stdin_tests("7", "7", "7 "),
        [{"check": "assert f(1) == 2"}, {"check": "assert f(2) == 3"}],
        # A stdin and a call test are never a pair, even with different outputs.
        [*stdin_tests("1"), *call_tests(2)],
    ],
    ids=["none", "one", "all-equal", "program-tests", "mixed-kinds"],
)
def test_fewer_than_two_distinct_outputs_is_dropped(tests: list[dict[str, Any]]) -> None:
    assert perturb_tests(tests, seed=0, external_id="x") is None


def test_program_tests_stay_in_the_rest() -> None:
    tests = [{"check": "assert True"}, *stdin_tests("a", "b")]
    result = perturb_tests(tests, seed=1, external_id="x")
    assert result is not None
    assert {"check": "assert True"} in result.public_tests[2:]


def test_pair_is_the_first_in_shuffled_order() -> None:
    tests = stdin_tests("a", "a", "b", "a", "c", "b")
    for seed in range(30):
        shuffled = list(range(len(tests)))
        problem_rng(seed, "x").shuffle(shuffled)
        outs = [tests[i]["expected_stdout"] for i in shuffled]
        i = next(p for p in range(len(outs)) if any(o != outs[p] for o in outs[p + 1 :]))
        j = next(q for q in range(i + 1, len(outs)) if outs[q] != outs[i])
        result = perturb_tests(tests, seed=seed, external_id="x")
        assert result is not None
        rest = [shuffled[p] for p in range(len(shuffled)) if p not in (i, j)]
        assert result.perturbation["order"] == [shuffled[i], shuffled[j], *rest]


def test_deterministic_per_seed_and_problem() -> None:
    tests = stdin_tests(*(str(n) for n in range(8)))
    first = perturb_tests(tests, seed=5, external_id="p")
    assert first == perturb_tests(tests, seed=5, external_id="p")
    orders = {
        tuple(r.perturbation["order"])
        for seed in range(10)
        if (r := perturb_tests(tests, seed=seed, external_id="p")) is not None
    }
    assert len(orders) > 5  # seeds give different shuffles
    by_problem = {
        tuple(r.perturbation["order"])
        for name in "abcdefghij"
        if (r := perturb_tests(tests, seed=5, external_id=name)) is not None
    }
    assert len(by_problem) > 5  # and so do problems under one seed


# --- on a stored dataset ------------------------------------------------------------------


def problem_row(external_id: str, public: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "external_id": external_id,
        "statement": f"Problem {external_id}.",
        "starter_code": "",
        "test_style": "stdin",
        "fn_name": None,
        "public_tests": public,
        "hidden_tests": [{"stdin": f"h{i}", "expected_stdout": str(i)} for i in range(16)],
        "difficulty": "easy",
        "source_metadata": {"n": external_id},
    }


@pytest.fixture
def source(sessions: sessionmaker[Session]) -> list[dict[str, Any]]:
    rows = [problem_row(f"p{i}", stdin_tests("1", "2", "3", str(i % 2 + 1))) for i in range(25)]
    rows += [problem_row("same", stdin_tests("9", "9", "9 ", "9")), problem_row("empty", [])]
    with sessions.begin() as session:
        dataset = repo_datasets.create_dataset(session, name="src", source="jsonl")
        repo_datasets.insert_problems(session, dataset_id=dataset.id, rows=rows)
    return rows


def stored(sessions: sessionmaker[Session], name: str) -> dict[str, Any]:
    with sessions.begin() as session:
        dataset = repo_datasets.get_dataset(session, name=name)
        assert dataset is not None
        problems = repo_datasets.iter_problems(session, dataset_id=dataset.id, batch=7)
        return {
            "dataset": (dataset.source, dataset.variant, dataset.parent_id, dataset.provenance),
            "problems": {
                p.external_id: {
                    "statement": p.statement,
                    "public": p.public_tests,
                    "hidden": p.hidden_tests,
                    "difficulty": p.difficulty,
                    "source_metadata": p.source_metadata,
                    "perturbation": p.perturbation,
                }
                for p in problems
            },
        }


def test_perturbed_dataset(sessions: sessionmaker[Session], source: list[dict[str, Any]]) -> None:
    report = perturb_dataset(sessions=sessions, source="src", target="src-p", seed=3, batch_size=10)
    assert (report.read, report.kept, sorted(report.dropped)) == (27, 25, ["empty", "same"])
    result = stored(sessions, "src-p")
    parent = stored(sessions, "src")
    kind, variant, parent_id, provenance = result["dataset"]
    assert (kind, variant) == ("perturb", "perturbed")
    with sessions.begin() as session:
        src = repo_datasets.get_dataset(session, name="src")
        assert src is not None and parent_id == src.id
    assert provenance["perturbation"]["seed"] == 3
    assert provenance["counts"] == {"read": 27, "kept": 25, "dropped": 2}
    rows = {row["external_id"]: row for row in source}
    assert set(result["problems"]) == {f"p{i}" for i in range(25)}
    for external_id, problem in result["problems"].items():
        original = rows[external_id]
        assert problem["hidden"] == original["hidden_tests"]  # hidden tests untouched
        assert problem["statement"] == original["statement"]
        assert problem["source_metadata"] == original["source_metadata"]
        expected = perturb_tests(original["public_tests"], seed=3, external_id=external_id)
        assert expected is not None
        assert problem["public"] == expected.public_tests
        assert problem["perturbation"] == expected.perturbation
        assert parent["problems"][external_id]["perturbation"] is None
        outputs = Counter(t["expected_stdout"] for t in problem["public"])
        assert outputs == Counter(t["expected_stdout"] for t in original["public_tests"])
    assert parent["problems"]["p0"]["public"] == rows["p0"]["public_tests"]  # source unchanged


def test_seeds_give_different_datasets(
    sessions: sessionmaker[Session], source: list[dict[str, Any]]
) -> None:
    perturb_dataset(sessions=sessions, source="src", target="a", seed=1)
    perturb_dataset(sessions=sessions, source="src", target="b", seed=1)
    perturb_dataset(sessions=sessions, source="src", target="c", seed=2)
    a, b, c = (stored(sessions, name)["problems"] for name in "abc")
    assert a == b
    assert a != c


def test_refuses_existing_target_and_missing_source(
    sessions: sessionmaker[Session], source: list[dict[str, Any]]
) -> None:
    perturb_dataset(sessions=sessions, source="src", target="taken", seed=0)
    with pytest.raises(Conflict, match="already exists"):
        perturb_dataset(sessions=sessions, source="src", target="taken", seed=1)
    with pytest.raises(Conflict):
        perturb_dataset(sessions=sessions, source="src", target="src", seed=1)
    with pytest.raises(NotFound, match="no dataset"):
        perturb_dataset(sessions=sessions, source="nope", target="new", seed=0)
    with sessions.begin() as session:
        assert repo_datasets.get_dataset(session, name="new") is None
