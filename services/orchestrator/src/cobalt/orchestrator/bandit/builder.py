"""Build a contextual-bandit dataset from an evaluated run and store it.

Reads a run's finished trajectories with their public and hidden verdicts, applies the
rules of `selection` problem by problem, renders each context's messages (turn 0's
prompt plus the stored responses and feedback of the turns it includes, exactly as the
loop sent them), drops contexts over the token cap, mixes in contexts of other bandit
datasets (perturbed augmentation), shuffles with the seed and stores the result with
per-rule counts. A refine run with 2 feedback turns is what docs/method.md builds from; a
run without feedback turns gives turn-0 contexts only (the single-turn baseline), so it
is refused unless asked for by name (`turn_zero_only`): built by mistake from a sample
run, "Cobalt" training would silently be single-turn GRPO.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.bandit.options import DEFAULT_MAX_PROMPT_TOKENS, DEFAULT_SEED
from cobalt.orchestrator.bandit.selection import (
    DEFAULT_CONTEXT_TURNS,
    DEFAULT_FIRST_STOP_TURNS,
    DEFAULT_KEEP,
    DropCounts,
    PlannedContext,
    TrajectoryScores,
    pass_over_all_tests,
    plan_contexts,
    plan_research_validation_contexts,
    plan_validation_context,
)
from cobalt.orchestrator.rollouts.conversation import TurnRecord, next_turn_messages
from cobalt.orchestrator.store import repo_bandit, repo_runs, repo_trajectories, repo_turns
from cobalt.orchestrator.store.models import Problem, RunStatus, TrajectoryStatus, Turn
from cobalt.orchestrator.store.repo_bandit import ContextRow
from cobalt.shared.contracts.browse import BanditDatasetParams, BanditMix
from cobalt.shared.contracts.runs import RunParams
from cobalt.shared.errors import Conflict, InvalidInput

__all__ = ["BuildOptions", "BuildResult", "build_bandit_dataset"]

TokenCount = Callable[[Sequence[dict[str, Any]]], int]


@dataclass(frozen=True, slots=True)
class BuildOptions:
    """Every setting of a build; paper values as defaults. Stored with the dataset."""

    validation: bool = False
    keep: int = DEFAULT_KEEP
    context_turns: tuple[int, ...] = DEFAULT_CONTEXT_TURNS
    max_prompt_tokens: int = DEFAULT_MAX_PROMPT_TOKENS
    seed: int = DEFAULT_SEED
    mix: tuple[tuple[str, float], ...] = ()
    """(bandit dataset name, contexts of it per own context)."""
    tokenizer: str = ""
    """Where the token counter came from (recorded, not used here)."""
    first_stop_turns: tuple[int, int] = DEFAULT_FIRST_STOP_TURNS
    """Turns whose both passing everything stops a trajectory at its first context
    ((0, 2): the research script's reading, a parity option)."""
    research_validation: bool = False
    """Validation mode as the research script builds it: the turn-0 context plus the
    chosen trajectory's contexts after 1, 2, 3 turns (default: one context per problem)."""
    turn_zero_only: bool = False
    """Build from a run without feedback turns (turn-0 contexts only) rather than refuse."""

    def as_params(self) -> BanditDatasetParams:
        """The settings as the dataset stores them."""
        return BanditDatasetParams(
            validation=self.validation,
            keep=self.keep,
            context_turns=self.context_turns,
            max_prompt_tokens=self.max_prompt_tokens,
            seed=self.seed,
            mix=tuple(BanditMix(name=name, ratio=ratio) for name, ratio in self.mix),
            tokenizer=self.tokenizer,
            first_stop_turns=self.first_stop_turns,
            research_validation=self.research_validation,
            turn_zero_only=self.turn_zero_only,
        )


@dataclass(frozen=True, slots=True)
class BuildResult:
    dataset_id: int
    name: str
    contexts: int
    counts: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Trajectory:
    id: int
    sample_index: int
    turns: list[Turn]
    scores: TrajectoryScores


def _scores(sample_index: int, turns: Sequence[Turn]) -> TrajectoryScores:
    return TrajectoryScores(
        sample_index=sample_index,
        passes=tuple(
            pass_over_all_tests(t.public_verdicts, t.hidden_verdicts or [], t.code is not None)
            for t in turns
        ),
        public_all_passed=tuple(t.code is not None and t.public_passed for t in turns),
    )


def _load(
    session: Session, run_id: int, counts: DropCounts
) -> dict[int, tuple[Problem, list[_Trajectory]]]:
    """The run's complete trajectories per problem, every turn judged on hidden tests."""
    problems = repo_trajectories.problems_with_trajectories(session, run_id=run_id)
    turns: dict[int, list[Turn]] = defaultdict(list)
    for turn in repo_turns.judged_turns(session, run_id=run_id, problems=problems):
        turns[turn.trajectory_id].append(turn)
    run_params = repo_runs.get_run(session, run_id=run_id).params
    expected_turns = 1 + run_params.feedback_turns
    by_problem: dict[int, tuple[Problem, list[_Trajectory]]] = {}
    for trajectory in repo_trajectories.trajectories_of(session, run_id=run_id):
        counts.trajectories += 1
        rows = turns.get(trajectory.id, [])
        complete = trajectory.status == TrajectoryStatus.FINISHED.value and rows
        # stop_on_pass trajectories end early on purpose; others must have every turn.
        if not complete or [t.turn_index for t in rows] != list(range(len(rows))):
            counts.trajectories_incomplete += 1
            continue
        if len(rows) < expected_turns and not rows[-1].public_passed:
            counts.trajectories_incomplete += 1
            continue
        problem = problems[trajectory.problem_id]
        entry = by_problem.setdefault(problem.id, (problem, []))
        entry[1].append(
            _Trajectory(
                trajectory.id, trajectory.sample_index, rows, _scores(trajectory.sample_index, rows)
            )
        )
    counts.problems = len(problems)
    return by_problem


def _context_messages(turns: Sequence[Turn], assistant_turns: int) -> list[dict[str, Any]]:
    """Turn 0's prompt, then the first `assistant_turns` answers with their feedback."""
    records = [TurnRecord(t.stored_response, t.feedback) for t in turns[:assistant_turns]]
    return next_turn_messages(turns[0].messages, records)


def _own_contexts(
    run_id: int,
    template_sha256: str,
    by_problem: dict[int, tuple[Problem, list[_Trajectory]]],
    options: BuildOptions,
    count_tokens: TokenCount,
    counts: DropCounts,
) -> list[ContextRow]:
    contexts: list[ContextRow] = []

    def add(problem_id: int, trajectory: _Trajectory, plan: PlannedContext) -> bool:
        """Append the context unless it is over the token cap; False when it was.

        A turn-0 context (`assistant_turns` 0) has no source trajectory: it is the prompt
        every trajectory of the problem started from.
        """
        messages = _context_messages(trajectory.turns, plan.assistant_turns)
        tokens = count_tokens(messages)
        if tokens > options.max_prompt_tokens:
            counts.dropped_over_token_cap += 1
            return False
        contexts.append(
            ContextRow(
                problem_id=problem_id,
                source_run_id=run_id,
                trajectory_id=trajectory.id if plan.assistant_turns else None,
                assistant_turns=plan.assistant_turns,
                messages=messages,
                prev_best=plan.prev_best,
                prompt_tokens=tokens,
                template_sha256=template_sha256,
            )
        )
        return True

    for problem_id, (_, trajectories) in sorted(by_problem.items()):
        by_sample = {t.sample_index: t for t in trajectories}
        scores = [t.scores for t in trajectories]
        if options.validation and not options.research_validation:
            plan = plan_validation_context(scores, counts, max_turns=max(options.context_turns))
            if plan is not None and add(problem_id, by_sample[plan.sample_index], plan):
                counts.partial_contexts += 1
            continue
        if options.validation:
            emit_turn_0, plans = plan_research_validation_contexts(
                scores,
                counts,
                context_turns=options.context_turns,
                first_stop_turns=options.first_stop_turns,
            )
        else:
            emit_turn_0, plans = plan_contexts(
                scores,
                counts,
                keep=options.keep,
                context_turns=options.context_turns,
                first_stop_turns=options.first_stop_turns,
            )
        if emit_turn_0 and add(problem_id, trajectories[0], PlannedContext(-1, 0, 0.0)):
            counts.turn_0_contexts += 1
        stopped: set[int] = set()
        for plan in plans:  # in order per trajectory: the cap ends that trajectory
            if plan.sample_index in stopped:
                continue
            if add(problem_id, by_sample[plan.sample_index], plan):
                counts.partial_contexts += 1
            else:
                stopped.add(plan.sample_index)
    return contexts


def _mixed_contexts(
    session: Session, options: BuildOptions, own: int, rng: random.Random, counts: DropCounts
) -> list[ContextRow]:
    mixed: list[ContextRow] = []
    for name, ratio in options.mix:
        other = repo_bandit.get_bandit_dataset(session, name=name)
        available = repo_bandit.contexts_of(session, dataset_id=other.id)
        wanted = min(len(available), round(ratio * own))
        chosen = rng.sample(available, wanted)
        counts.mixed_in[name] = wanted
        mixed += [
            ContextRow(
                problem_id=c.problem_id,
                source_run_id=c.source_run_id,
                trajectory_id=c.trajectory_id,
                assistant_turns=c.assistant_turns,
                messages=c.messages,
                prev_best=c.prev_best,
                prompt_tokens=c.prompt_tokens,
                template_sha256=c.template_sha256,
                mixed_from_id=other.id,
            )
            for c in chosen
        ]
    return mixed


def _refuse_without_feedback_turns(session: Session, run_id: int, params: RunParams) -> None:
    """InvalidInput, naming the runs that continue it, when run `run_id` has no feedback
    turn: its contexts could only be turn-0 ones."""
    if params.feedback_turns > 0:
        return
    refine_runs = repo_bandit.refine_runs_of(session, run_id=run_id)
    where = (
        f"build from its refine run{'s' if len(refine_runs) > 1 else ''} "
        + ", ".join(str(r) for r in refine_runs)
        if refine_runs
        else f"refine it first (`cobalt run refine --from {run_id} --turns 2`) and build from that"
    )
    raise InvalidInput(
        f"run {run_id} has no feedback turns, so it gives turn-0 contexts only (single-turn "
        f"training); {where}, or pass --turn-zero-only to build turn-0 contexts on purpose"
    )


def build_bandit_dataset(
    sessions: sessionmaker[Session],
    *,
    run_id: int,
    name: str,
    options: BuildOptions,
    count_tokens: TokenCount,
    replace: bool = False,
) -> BuildResult:
    """Build the dataset `name` from run `run_id` and store it in one transaction.

    Raises:
        NotFound: no such run, or a dataset to mix in does not exist.
        InvalidInput: the run is not finished or not evaluated on hidden tests, has no
            feedback turns (unless `options.turn_zero_only`), or an option is out of range.
        Conflict: `name` exists and `replace` is False.
    """
    if options.keep < 1 or options.max_prompt_tokens < 1:
        raise InvalidInput("keep and max_prompt_tokens must be at least 1")
    if options.research_validation and not options.validation:
        raise InvalidInput("research_validation shapes a validation set: build with validation")
    if any(ratio < 0 for _, ratio in options.mix):
        raise InvalidInput("a mix ratio cannot be negative")
    counts = DropCounts()
    with sessions.begin() as session:
        run = repo_runs.get_run(session, run_id=run_id)
        if run.status != RunStatus.FINISHED:
            raise InvalidInput(
                f"run {run_id} is {run.status}; build from a finished run (`cobalt run "
                f"resume {run_id}` completes it)"
            )
        if not options.turn_zero_only:
            _refuse_without_feedback_turns(session, run_id, run.params)
        if not replace:
            existing = {d.name for d, _ in repo_bandit.list_bandit_datasets(session)}
            if name in existing:
                raise Conflict(f"a bandit dataset named {name!r} exists; pass --replace")
        by_problem = _load(session, run_id, counts)
        own = _own_contexts(run_id, run.template_sha256, by_problem, options, count_tokens, counts)
        rng = random.Random(options.seed)
        contexts = own + _mixed_contexts(session, options, len(own), rng, counts)
        rng.shuffle(contexts)
        if replace and name in {d.name for d, _ in repo_bandit.list_bandit_datasets(session)}:
            repo_bandit.delete_bandit_dataset(session, name=name)
            session.flush()
        dataset = repo_bandit.create_bandit_dataset(
            session,
            name=name,
            source_run_id=run_id,
            split="validation" if options.validation else "train",
            params=options.as_params(),
            counts=counts.as_dict(),
            contexts=contexts,
        )
        return BuildResult(dataset.id, name, len(contexts), counts.as_dict())
