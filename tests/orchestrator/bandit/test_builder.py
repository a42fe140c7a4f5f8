"""The bandit builder on a synthetic stored run whose contexts are worked out by hand.

Every problem has 2 public and 2 hidden tests, so a turn's pass rate over all tests is
(accepted public + accepted hidden) / 4. A turn is written as (public, hidden) verdict
strings, A = accepted, W = wrong answer, or None for a turn without a program.

problem p1 (7 trajectories, passes per turn):
  s0 .25 .5 1    public all passed: F T T   candidate, improvement .75
  s1 0   1  1    (turn 0 had no code) F T T candidate, improvement 1
  s2 .5  .5 .5                              not a candidate (no improvement)
  s3 .25 .75 .75                            not a candidate (never solves)
  s4 .75 1  .75  T T T                      candidate, improvement .25
  s5 .5  1  1    T T T                      candidate, improvement .5
  s6 .25 1  1    F T T                      candidate, improvement .75
  Down-sampling of [.25 s4, .5 s5, .75 s0, .75 s6, 1 s1] keeps s4 s5 s0 s1 (the 3 lowest
  plus the highest has the largest variance, .078 against .043 for the 4 lowest).
  Contexts: turn 0 (prev 0); s0 after 1 (prev .25) and 2 turns (prev .5), then two
  all-passed feedbacks stop it; s1 after 1 (prev 0) and 2 (prev 1); s4 after 1 (prev
  .75), then stop; s5 after 1 (prev .5), then stop.  -> 7 contexts
problem p2: every turn-0 sample passes everything: skipped (dynamic sampling).
problem p3:
  t0 1 1 .5   candidate, but turns 0 and 1 both pass: stopped at the first context
  t1 0 0 1    after 1 turn (prev 0); after 2 turns its prompt is over the token cap
  -> turn 0 and t1 after 1 turn: 2 contexts
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.bandit.builder import BuildOptions, build_bandit_dataset
from cobalt.orchestrator.bandit.selection import RESEARCH_FIRST_STOP_TURNS, max_variance_subset
from cobalt.orchestrator.store import repo_bandit
from cobalt.orchestrator.store.models import Trajectory
from cobalt.orchestrator.store.models import Turn as TurnModel
from cobalt.shared.errors import Conflict, InvalidInput
from tests.support.bandit import PROMPT, stored_run


def words(messages: Any) -> int:
    """A stand-in token count: words of all message texts (the CLI test uses a tokenizer)."""
    return sum(len(m["content"].split()) for m in messages)


def contexts(sessions: sessionmaker[Session], name: str) -> list[Any]:
    with sessions() as session:
        dataset = repo_bandit.get_bandit_dataset(session, name=name)
        return repo_bandit.contexts_of(session, dataset_id=dataset.id)


def key(context: Any, ids: dict[str, int], samples: dict[int, tuple[int, int]]) -> tuple:
    problem = next(n for n, i in ids.items() if i == context.problem_id)
    sample = samples[context.trajectory_id][1] if context.trajectory_id else -1
    return (problem, sample, context.assistant_turns, context.prev_best)


def sample_of_trajectory(sessions: sessionmaker[Session]) -> dict[int, tuple[int, int]]:
    with sessions() as session:
        return {t.id: (t.problem_id, t.sample_index) for t in session.scalars(select(Trajectory))}


def test_training_contexts_follow_every_rule(sessions: sessionmaker[Session]) -> None:
    run_id, ids = stored_run(sessions)
    result = build_bandit_dataset(
        sessions,
        run_id=run_id,
        name="train",
        options=BuildOptions(max_prompt_tokens=200),
        count_tokens=words,
    )
    built = contexts(sessions, "train")
    samples = sample_of_trajectory(sessions)
    assert sorted(key(c, ids, samples) for c in built) == sorted(
        [
            ("p1", -1, 0, 0.0),
            ("p1", 0, 1, 0.25),
            ("p1", 0, 2, 0.5),
            ("p1", 1, 1, 0.0),
            ("p1", 1, 2, 1.0),
            ("p1", 4, 1, 0.75),
            ("p1", 5, 1, 0.5),
            ("p3", -1, 0, 0.0),
            ("p3", 1, 1, 0.0),
        ]
    )
    assert result.contexts == len(built) == 9
    counts = result.counts
    assert counts["problems"] == 3 and counts["problems_all_pass_at_turn_0"] == 1
    assert counts["trajectories"] == 11 and counts["trajectories_incomplete"] == 0
    assert counts["not_candidates"] == 2  # p1's s2 and s3
    assert counts["dropped_by_downsampling"] == 1  # p1's s6
    assert counts["stopped_two_passed_feedbacks"] == 4
    assert counts["stopped_first_context_both_pass"] == 1
    assert counts["dropped_over_token_cap"] == 1
    assert (counts["turn_0_contexts"], counts["partial_contexts"]) == (2, 7)

    s0_after_2 = next(c for c in built if key(c, ids, samples) == ("p1", 0, 2, 0.5))
    assert s0_after_2.messages == [
        *PROMPT,
        {"role": "assistant", "content": "answer 0.0"},
        {"role": "user", "content": "feedback 0.0"},
        {"role": "assistant", "content": "answer 0.1"},
        {"role": "user", "content": "feedback 0.1"},
    ]
    assert s0_after_2.prompt_tokens == words(s0_after_2.messages)
    assert {c.template_sha256 for c in built} == {"ab" * 32}
    assert {c.source_run_id for c in built} == {run_id}
    assert [c.position for c in built] == list(range(9))


def test_the_shuffle_is_seeded(sessions: sessionmaker[Session]) -> None:
    run_id, _ = stored_run(sessions)

    def order(name: str, seed: int) -> list[tuple[Any, ...]]:
        build_bandit_dataset(
            sessions,
            run_id=run_id,
            name=name,
            options=BuildOptions(max_prompt_tokens=200, seed=seed),
            count_tokens=words,
        )
        return [
            (c.problem_id, c.trajectory_id or -1, c.assistant_turns)
            for c in contexts(sessions, name)
        ]

    first, again, other = order("a", 42), order("b", 42), order("c", 7)
    assert first == again and sorted(first) == sorted(other) and first != other


def test_validation_keeps_one_smallest_improvement_context_per_problem(
    sessions: sessionmaker[Session],
) -> None:
    run_id, ids = stored_run(sessions)
    result = build_bandit_dataset(
        sessions,
        run_id=run_id,
        name="val",
        options=BuildOptions(validation=True, max_prompt_tokens=200),
        count_tokens=words,
    )
    built = contexts(sessions, "val")
    samples = sample_of_trajectory(sessions)
    # p1: s4 (improvement .25) after 3 turns, best .75/1/.75; p3: t0 (.5), best 1.
    assert sorted(key(c, ids, samples) for c in built) == [("p1", 4, 3, 1.0), ("p3", 0, 3, 1.0)]
    assert all(len(c.messages) == 8 for c in built)
    with sessions() as session:
        assert repo_bandit.get_bandit_dataset(session, name="val").split == "validation"
    assert result.counts["problems_all_pass_at_turn_0"] == 1


def test_mixing_copies_contexts_of_another_dataset_with_their_origin(
    sessions: sessionmaker[Session],
) -> None:
    run_id, _ = stored_run(sessions)
    options = BuildOptions(max_prompt_tokens=200)
    build_bandit_dataset(sessions, run_id=run_id, name="other", options=options, count_tokens=words)
    mixed = build_bandit_dataset(
        sessions,
        run_id=run_id,
        name="mixed",
        options=BuildOptions(max_prompt_tokens=200, mix=(("other", 1 / 3),)),
        count_tokens=words,
    )
    built = contexts(sessions, "mixed")
    with sessions() as session:
        other_id = repo_bandit.get_bandit_dataset(session, name="other").id
    assert mixed.counts["mixed_in"] == {"other": 3}  # round(9 / 3)
    assert len(built) == 12 and sum(c.mixed_from_id == other_id for c in built) == 3


def test_bad_requests_are_refused_and_store_nothing(sessions: sessionmaker[Session]) -> None:
    run_id, _ = stored_run(sessions)
    options = BuildOptions(max_prompt_tokens=200)
    build_bandit_dataset(sessions, run_id=run_id, name="x", options=options, count_tokens=words)
    with pytest.raises(Conflict, match="exists"):
        build_bandit_dataset(sessions, run_id=run_id, name="x", options=options, count_tokens=words)
    with sessions.begin() as session:  # a turn without hidden results: not evaluated
        turn = session.scalars(select(TurnModel)).first()
        assert turn is not None
        turn.hidden_passed = None
    with pytest.raises(InvalidInput, match="cobalt run evaluate"):
        build_bandit_dataset(sessions, run_id=run_id, name="y", options=options, count_tokens=words)
    with sessions() as session:
        assert [d.name for d, _ in repo_bandit.list_bandit_datasets(session)] == ["x"]


def test_downsampling_order_does_not_depend_on_row_order() -> None:
    rng = random.Random(0)
    values = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.9, 1.0]
    shuffled = values[:]
    rng.shuffle(shuffled)
    kept = sorted(shuffled[i] for i in max_variance_subset(shuffled))
    assert kept == [0.1, 0.2, 0.9, 1.0]


def test_research_first_stop_checks_turns_0_and_2(sessions: sessionmaker[Session]) -> None:
    """p3's t0 passes everything at turns 0 and 1 but not 2: the default reading stops it
    at its first context, the research script's reading keeps its context after 1 turn
    (prev 1.0); its two all-passed feedbacks then stop it."""
    run_id, ids = stored_run(sessions)
    research = BuildOptions(max_prompt_tokens=200, first_stop_turns=RESEARCH_FIRST_STOP_TURNS)
    result = build_bandit_dataset(
        sessions, run_id=run_id, name="research", options=research, count_tokens=words
    )
    samples = sample_of_trajectory(sessions)
    built = {key(c, ids, samples) for c in contexts(sessions, "research")}
    assert ("p3", 0, 1, 1.0) in built and len(built) == 10
    assert result.counts["stopped_first_context_both_pass"] == 0
    assert result.counts["stopped_two_passed_feedbacks"] == 5
    with sessions() as session:
        params = repo_bandit.get_bandit_dataset(session, name="research").params
    assert params.first_stop_turns == (0, 2) and params.research_validation is False


def test_research_validation_adds_turn_0_and_the_candidates_contexts(
    sessions: sessionmaker[Session],
) -> None:
    """p1: turn 0, then s4 (smallest improvement) after 1 turn; its two all-passed
    feedbacks stop it. p3: turn 0; t0 stops at its first context (turns 0 and 1 pass),
    unless the research first-stop reading is chosen too."""
    run_id, ids = stored_run(sessions)
    options = BuildOptions(validation=True, research_validation=True, max_prompt_tokens=200)
    build_bandit_dataset(sessions, run_id=run_id, name="rv", options=options, count_tokens=words)
    samples = sample_of_trajectory(sessions)
    assert sorted(key(c, ids, samples) for c in contexts(sessions, "rv")) == [
        ("p1", -1, 0, 0.0),
        ("p1", 4, 1, 0.75),
        ("p3", -1, 0, 0.0),
    ]
    both = BuildOptions(
        validation=True,
        research_validation=True,
        first_stop_turns=RESEARCH_FIRST_STOP_TURNS,
        max_prompt_tokens=200,
    )
    build_bandit_dataset(sessions, run_id=run_id, name="rv2", options=both, count_tokens=words)
    assert ("p3", 0, 1, 1.0) in {key(c, ids, samples) for c in contexts(sessions, "rv2")}
    with pytest.raises(InvalidInput, match="validation"):
        build_bandit_dataset(
            sessions,
            run_id=run_id,
            name="rv3",
            options=BuildOptions(research_validation=True),
            count_tokens=words,
        )
