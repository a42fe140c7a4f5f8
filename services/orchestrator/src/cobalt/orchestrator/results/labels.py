"""A run's name, tags and notes: set by people, shown everywhere a run is."""

from __future__ import annotations

from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.store import repo_runs
from cobalt.shared.contracts.results import RunLabels

__all__ = ["label_run"]


def label_run(sessions: sessionmaker[Session], run_id: int, labels: RunLabels) -> None:
    """Set the fields `labels` gives (an empty name or notes clears it); tags are replaced,
    or added to and removed from.

    Raises:
        NotFound: no such run.
    """
    with sessions.begin() as session:
        run = repo_runs.get_run(session, run_id=run_id)
        if labels.name is not None:
            run.name = labels.name or None
        if labels.notes is not None:
            run.notes = labels.notes or None
        tags = list(run.tags or []) if labels.tags is None else list(labels.tags)
        tags += [t for t in labels.add_tags if t not in tags]
        run.tags = [t for t in dict.fromkeys(tags) if t not in set(labels.remove_tags)]
