"""Bandit datasets read for people: each with the builder's per-rule counts, and its
contexts page by page (the same rows the trainer's rounds take, in the same order)."""

from __future__ import annotations

from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.store import repo_bandit
from cobalt.orchestrator.store.models import BanditDataset
from cobalt.shared.contracts.browse import (
    BanditContextPublic,
    BanditContextsPage,
    BanditDatasetPublic,
    BanditDatasetsPublic,
)

__all__ = ["contexts_page", "list_bandit_datasets"]


def _public(dataset: BanditDataset, contexts: int) -> BanditDatasetPublic:
    return BanditDatasetPublic(
        id=dataset.id,
        name=dataset.name,
        split=dataset.split,
        source_run_id=dataset.source_run_id,
        contexts=contexts,
        params=dataset.params,
        counts=dataset.counts,
        created_at=dataset.created_at,
    )


def list_bandit_datasets(sessions: sessionmaker[Session]) -> BanditDatasetsPublic:
    """Every bandit dataset with its context count and drop counts, newest first."""
    with sessions() as session:
        items = [_public(d, n) for d, n in repo_bandit.list_bandit_datasets(session)]
    return BanditDatasetsPublic(items=items, total=len(items))


def contexts_page(
    sessions: sessionmaker[Session], *, name: str, offset: int = 0, limit: int = 50
) -> BanditContextsPage:
    """A page of a bandit dataset's contexts in position order.

    Raises:
        NotFound: no bandit dataset of that name.
    """
    with sessions() as session:
        dataset = repo_bandit.get_bandit_dataset(session, name=name)
        total, rows = repo_bandit.contexts_slice(
            session, dataset_id=dataset.id, offset=offset, limit=limit
        )
        items = [
            BanditContextPublic(
                position=context.position,
                problem=external_id,
                assistant_turns=context.assistant_turns,
                prev_best=context.prev_best,
                prompt_tokens=context.prompt_tokens,
                trajectory_id=context.trajectory_id,
                mixed_from=mixed_from,
                messages=context.messages,
            )
            for context, external_id, mixed_from in rows
        ]
    return BanditContextsPage(dataset=name, items=items, total=total, offset=offset)
