"""The Cobalt reward of every evaluated turn of a run, stored with every component.

Evaluation fills in the hidden verdicts; then each turn is scored the way the trainer
scores a sample for the context made of the trajectory's earlier turns (docs/method.md): p over
all the problem's tests (public and hidden), b = the best p of the earlier turns (0 for
turn 0). The rows (`turn_rewards`, one column per component) let shaping and hacking be
studied with a query, e.g. how often a format rule fired per turn, or the reward of turns
that passed the public tests but not the hidden ones.

Token lengths come from the stored completion ids when they are the response's
(`TokenizerCounter.count_parts_from_ids`), else from tokenizing. Turns already scored are
left alone, so evaluating again scores only what is new; a trajectory is scored up to its
first turn without hidden results (its later turns' b would be unknown), or with a
`sandbox_error` among its verdicts: a test the sandbox failed to run is never a fail.

The format rules are the run's (`RunParams.reward_format`, chosen when it was sampled for
the model that writes it), so a run is scored as a training job of that model with the
same setting trains on it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.store import repo_rewards, repo_runs
from cobalt.orchestrator.store.models import Turn
from cobalt.shared.errors import Conflict
from cobalt.shared.reward_format import RewardFormat

if TYPE_CHECKING:
    # Imported where turns are scored: the reward pulls in numpy and tokenizers, and the
    # execution helpers the HTTP clients, which reading a run's mean reward never needs.
    from cobalt.shared.reward import ScoreInput, TokenCounter

__all__ = ["mean_reward_per_turn", "run_reward_format", "score_turn_rewards"]

_TRAJECTORIES_PER_BATCH = 256
"""Trajectories loaded and scored at once: bounds memory (responses can be 20k chars)."""


@dataclass(frozen=True, slots=True)
class _TurnToScore:
    turn_id: int
    turn_index: int
    item: ScoreInput


def _passed(verdicts: Sequence[str] | None) -> int:
    return sum(verdict == "accepted" for verdict in verdicts or ())


def _turns_to_score(
    turns: Sequence[Turn], test_counts: tuple[int, int], scored: set[int]
) -> Iterator[_TurnToScore]:
    """One trajectory's unscored turns with their test counts and prev_best."""
    from cobalt.shared.execution import unjudged_verdicts
    from cobalt.shared.reward import ScoreInput

    public_count, hidden_count = test_counts
    total = public_count + hidden_count
    best = 0.0
    for turn in turns:
        if turn.hidden_verdicts is None or hidden_count == 0:
            return  # not evaluated (evaluation skips problems without hidden tests)
        if unjudged_verdicts(turn.public_verdicts) or unjudged_verdicts(turn.hidden_verdicts):
            return  # never a reward from an infrastructure error (docs/reward.md)
        passed = (
            0
            if turn.code is None
            else _passed(turn.public_verdicts) + _passed(turn.hidden_verdicts)
        )
        if turn.id not in scored:
            item = ScoreInput(
                response=turn.raw_response,
                tests_passed=passed,
                tests_total=total,
                prev_best=best,
                token_ids=turn.completion_token_ids,
            )
            yield _TurnToScore(turn.id, turn.turn_index, item)
        best = max(best, passed / total)


def run_reward_format(
    sessions: sessionmaker[Session], run_id: int, asked: RewardFormat | None = None
) -> RewardFormat:
    """The format rules run `run_id` is scored with; `asked` (`--reward-format`) first
    becomes the run's when it differs and none of its turns is scored yet.

    Raises:
        NotFound: no such run.
        Conflict: `asked` differs from the rules its stored rewards were scored with.
    """
    with sessions.begin() as session:
        run = repo_runs.get_run(session, run_id=run_id)
        params = run.params
        if asked is None or asked == params.reward_format:
            return params.reward_format
        if repo_rewards.has_rewards(session, run_id=run_id):
            raise Conflict(
                f"run {run_id}'s rewards were scored with the {params.reward_format} format "
                f"rules, not {asked}; its stored rewards keep the rules they were scored with"
            )
        run.params = params.model_copy(update={"reward_format": asked})
    return asked


def score_turn_rewards(
    sessions: sessionmaker[Session], run_id: int, tokens: TokenCounter, *, tokenizer: str
) -> int:
    """Score and store every evaluated, not yet scored turn of `run_id`, with the run's
    format rules (`run_reward_format`).

    Args:
        sessions: The store.
        run_id: An evaluated run.
        tokens: The policy's tokenizer, for the length terms.
        tokenizer: What `tokens` is (its path), stored with each row.

    Returns:
        How many turns were scored now.
    """
    from cobalt.shared.reward import score_responses

    reward_format = run_reward_format(sessions, run_id)
    with sessions() as session:
        trajectory_ids = repo_rewards.trajectory_ids_of_run(session, run_id=run_id)
    written = 0
    for start in range(0, len(trajectory_ids), _TRAJECTORIES_PER_BATCH):
        batch = trajectory_ids[start : start + _TRAJECTORIES_PER_BATCH]
        with sessions() as session:
            pending = _pending(session, run_id, batch)
        if not pending:
            continue
        breakdowns = score_responses(
            [p.item for p in pending], tokens=tokens, reward_format=reward_format
        )
        with sessions.begin() as session:
            repo_rewards.add_turn_rewards(
                session,
                rows=(
                    {
                        "turn_id": p.turn_id,
                        "run_id": run_id,
                        "turn_index": p.turn_index,
                        "tokenizer": tokenizer,
                        **breakdown.to_dict(),
                    }
                    for p, breakdown in zip(pending, breakdowns, strict=True)
                ),
            )
        written += len(pending)
    return written


def _pending(session: Session, run_id: int, trajectory_ids: Sequence[int]) -> list[_TurnToScore]:
    turns = repo_rewards.turns_of_trajectories(session, trajectory_ids=trajectory_ids)
    scored = repo_rewards.scored_turn_ids(session, run_id=run_id, turn_ids=[t.id for t in turns])
    test_counts = repo_rewards.problem_test_counts(
        session, problem_ids={t.problem_id for t in turns}
    )
    by_trajectory: dict[int, list[Turn]] = {}
    for turn in turns:
        by_trajectory.setdefault(turn.trajectory_id, []).append(turn)
    return [
        scored_turn
        for trajectory_turns in by_trajectory.values()
        for scored_turn in _turns_to_score(
            trajectory_turns, test_counts[trajectory_turns[0].problem_id], scored
        )
    ]


def mean_reward_per_turn(
    sessions: sessionmaker[Session], run_id: int, turns: int
) -> list[float | None]:
    """The mean stored reward at each turn index (None where no turn was scored)."""
    with sessions() as session:
        means = repo_rewards.mean_reward_by_turn_index(session, run_id=run_id)
    return [means.get(turn) for turn in range(turns)]
