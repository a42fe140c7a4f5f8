"""Bandit datasets and their contexts in the store. Callers own the transaction."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, func, insert, select
from sqlalchemy.orm import Session

from cobalt.orchestrator.store.models import BanditContext, BanditDataset, Problem, Run
from cobalt.shared.contracts.browse import BanditDatasetParams
from cobalt.shared.errors import Conflict, NotFound

__all__ = [
    "ContextRow",
    "context_count",
    "context_ids",
    "contexts_of",
    "contexts_slice",
    "create_bandit_dataset",
    "delete_bandit_dataset",
    "get_bandit_dataset",
    "list_bandit_datasets",
    "refine_runs_of",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextRow:
    """One context as the builder hands it over (`position` is given on insert)."""

    problem_id: int
    source_run_id: int
    trajectory_id: int | None
    assistant_turns: int
    messages: list[dict[str, Any]]
    prev_best: float
    prompt_tokens: int
    template_sha256: str
    mixed_from_id: int | None = None


def refine_runs_of(session: Session, *, run_id: int) -> list[int]:
    """The ids of the runs that continue run `run_id` (its refine runs, what a bandit
    dataset is built from when `run_id` has no feedback turns), ascending."""
    return list(session.scalars(select(Run.id).where(Run.parent_run_id == run_id).order_by(Run.id)))


def get_bandit_dataset(session: Session, *, name: str) -> BanditDataset:
    """The bandit dataset called `name`.

    Raises:
        NotFound: there is none.
    """
    found = session.scalar(select(BanditDataset).where(BanditDataset.name == name))
    if found is None:
        known = list(session.scalars(select(BanditDataset.name).order_by(BanditDataset.name)))
        raise NotFound(
            f"no bandit dataset named {name!r}"
            + (f"; there are: {', '.join(known[:20])}" if known else "; build one first"),
            detail={"name": name},
        )
    return found


def list_bandit_datasets(session: Session) -> list[tuple[BanditDataset, int]]:
    """Every bandit dataset with its number of contexts, newest first."""
    counts = (
        select(BanditContext.bandit_dataset_id, func.count().label("n"))
        .group_by(BanditContext.bandit_dataset_id)
        .subquery()
    )
    rows = session.execute(
        select(BanditDataset, func.coalesce(counts.c.n, 0))
        .outerjoin(counts, counts.c.bandit_dataset_id == BanditDataset.id)
        .order_by(BanditDataset.id.desc())
    )
    return [(dataset, int(n)) for dataset, n in rows]


def create_bandit_dataset(
    session: Session,
    *,
    name: str,
    source_run_id: int,
    split: str,
    params: BanditDatasetParams,
    counts: dict[str, Any],
    contexts: Sequence[ContextRow],
) -> BanditDataset:
    """Store a dataset and its contexts, in the given order (positions 0, 1, ...).

    Raises:
        Conflict: a dataset of that name exists.
    """
    if session.scalar(select(BanditDataset.id).where(BanditDataset.name == name)) is not None:
        raise Conflict(
            f"a bandit dataset named {name!r} exists; choose another name or replace it",
            detail={"name": name},
        )
    dataset = BanditDataset(
        name=name, source_run_id=source_run_id, split=split, params=params, counts=counts
    )
    session.add(dataset)
    session.flush()
    if contexts:
        session.execute(
            insert(BanditContext),
            [
                {
                    "bandit_dataset_id": dataset.id,
                    "position": position,
                    "problem_id": c.problem_id,
                    "source_run_id": c.source_run_id,
                    "trajectory_id": c.trajectory_id,
                    "assistant_turns": c.assistant_turns,
                    "messages": c.messages,
                    "prev_best": c.prev_best,
                    "prompt_tokens": c.prompt_tokens,
                    "template_sha256": c.template_sha256,
                    "mixed_from_id": c.mixed_from_id,
                }
                for position, c in enumerate(contexts)
            ],
        )
    return dataset


def contexts_of(session: Session, *, dataset_id: int) -> list[BanditContext]:
    """A dataset's contexts in order."""
    return list(
        session.scalars(
            select(BanditContext)
            .where(BanditContext.bandit_dataset_id == dataset_id)
            .order_by(BanditContext.position)
        )
    )


def contexts_slice(
    session: Session, *, dataset_id: int, offset: int, limit: int
) -> tuple[int, list[tuple[BanditContext, str, str | None]]]:
    """How many contexts a dataset has, and `limit` of them from `offset` in position
    order, each with its problem's external id and the name of the dataset it was mixed
    from (None if none)."""
    total = session.scalar(
        select(func.count(BanditContext.id)).where(BanditContext.bandit_dataset_id == dataset_id)
    )
    names = dict(session.execute(select(BanditDataset.id, BanditDataset.name)).all())
    rows = session.execute(
        select(BanditContext, Problem.external_id)
        .join(Problem, Problem.id == BanditContext.problem_id)
        .where(BanditContext.bandit_dataset_id == dataset_id)
        .order_by(BanditContext.position)
        .offset(offset)
        .limit(limit)
    )
    return int(total or 0), [
        (
            context,
            external_id,
            names.get(context.mixed_from_id) if context.mixed_from_id else None,
        )
        for context, external_id in rows
    ]


def _context_ids_query(dataset_id: int, turn_zero_only: bool) -> Any:
    query = select(BanditContext.id).where(BanditContext.bandit_dataset_id == dataset_id)
    if turn_zero_only:
        query = query.where(BanditContext.assistant_turns == 0)
    return query


def context_ids(session: Session, *, dataset_id: int, turn_zero_only: bool) -> list[int]:
    """A dataset's context ids in order; with `turn_zero_only`, of the turn-0 contexts
    (the problem alone) only."""
    query = _context_ids_query(dataset_id, turn_zero_only).order_by(BanditContext.position)
    return list(session.scalars(query))


def context_count(session: Session, *, dataset_id: int, turn_zero_only: bool) -> int:
    """How many contexts `context_ids` would return."""
    subquery = _context_ids_query(dataset_id, turn_zero_only).subquery()
    return int(session.scalar(select(func.count()).select_from(subquery)) or 0)


def delete_bandit_dataset(session: Session, *, name: str) -> None:
    """Delete a dataset and its contexts.

    Raises:
        NotFound: there is none of that name.
    """
    dataset = get_bandit_dataset(session, name=name)
    session.execute(delete(BanditContext).where(BanditContext.bandit_dataset_id == dataset.id))
    session.delete(dataset)
