"""Reading datasets and problems as contracts: what `cobalt data list|show` (and later the
REST API) show, and deleting a dataset. Each function opens its own transaction."""

from __future__ import annotations

from itertools import islice

from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.store import repo_datasets
from cobalt.orchestrator.store.models import Dataset, Problem
from cobalt.shared.contracts import DatasetPublic, DatasetsPublic, ProblemPublic
from cobalt.shared.contracts.browse import ProblemsPage, ProblemSummary
from cobalt.shared.errors import Conflict, NotFound

__all__ = [
    "dataset_summary",
    "delete_dataset",
    "list_datasets",
    "problem_public",
    "problems_page",
]


def _dataset_public(dataset: Dataset, count: int) -> DatasetPublic:
    return DatasetPublic.model_validate(
        {
            "id": dataset.id,
            "name": dataset.name,
            "source": dataset.source,
            "variant": dataset.variant,
            "parent": dataset.parent.name if dataset.parent is not None else None,
            "provenance": dataset.provenance,
            "problem_count": count,
            "created_at": dataset.created_at,
        }
    )


def _problem_public(problem: Problem, dataset: str) -> ProblemPublic:
    return ProblemPublic.model_validate(
        {
            "id": problem.id,
            "dataset": dataset,
            "external_id": problem.external_id,
            "statement": problem.statement,
            "starter_code": problem.starter_code,
            "test_style": problem.test_style,
            "fn_name": problem.fn_name,
            "public_tests": problem.public_tests,
            "hidden_tests": problem.hidden_tests,
            "difficulty": problem.difficulty,
            "source_metadata": problem.source_metadata,
            "perturbation": problem.perturbation,
        }
    )


def _require_dataset(session: Session, name: str) -> Dataset:
    dataset = repo_datasets.get_dataset(session, name=name)
    if dataset is None:
        raise NotFound(f"no dataset named {name!r}; `cobalt data list` shows them")
    return dataset


def list_datasets(sessions: sessionmaker[Session]) -> DatasetsPublic:
    """Every dataset with its problem count, by name."""
    with sessions.begin() as session:
        items = [_dataset_public(d, n) for d, n in repo_datasets.list_datasets(session)]
    return DatasetsPublic(items=items, total=len(items))


def dataset_summary(
    sessions: sessionmaker[Session], *, name: str, first: int = 20
) -> tuple[DatasetPublic, list[str]]:
    """A dataset and the external ids of its first `first` problems.

    Raises:
        NotFound: no such dataset.
    """
    with sessions.begin() as session:
        dataset = _require_dataset(session, name)
        count = repo_datasets.count_problems(session, dataset_id=dataset.id)
        problems = repo_datasets.iter_problems(session, dataset_id=dataset.id, batch=first or 1)
        external_ids = [p.external_id for p in islice(problems, first)]
        return _dataset_public(dataset, count), external_ids


def problem_public(
    sessions: sessionmaker[Session], *, dataset: str, external_id: str
) -> ProblemPublic:
    """One stored problem.

    Raises:
        NotFound: no such dataset, or no such problem in it.
    """
    with sessions.begin() as session:
        stored = _require_dataset(session, dataset)
        row = repo_datasets.get_problem(session, dataset_id=stored.id, external_id=external_id)
        if row is None:
            raise NotFound(f"dataset {dataset!r} has no problem {external_id!r}")
        return _problem_public(row, dataset)


def problems_page(
    sessions: sessionmaker[Session],
    *,
    dataset: str,
    offset: int = 0,
    limit: int = 100,
    difficulty: str | None = None,
) -> ProblemsPage:
    """A page of a dataset's problems (in id order), optionally of one difficulty.

    Raises:
        NotFound: no such dataset.
    """
    with sessions() as session:
        stored = _require_dataset(session, dataset)
        total, rows = repo_datasets.problems_slice(
            session, dataset_id=stored.id, offset=offset, limit=limit, difficulty=difficulty
        )
        difficulties = repo_datasets.problem_difficulties(session, dataset_id=stored.id)
        return ProblemsPage(
            dataset=dataset,
            items=[
                ProblemSummary(
                    id=p.id,
                    external_id=p.external_id,
                    difficulty=p.difficulty,
                    test_style=p.test_style,
                    public_tests=len(p.public_tests),
                    hidden_tests=len(p.hidden_tests),
                    perturbed=p.perturbation is not None,
                    statement_start=p.statement[:200],
                )
                for p in rows
            ],
            total=total,
            offset=offset,
            difficulties=difficulties,
        )


def delete_dataset(sessions: sessionmaker[Session], name: str) -> int:
    """Delete dataset `name` and its problems; returns how many problems went.

    Refused while anything refers to its problems: runs (with their turns, evaluations
    and rewards), bandit contexts, training groups, hacking cases. Those are results, and
    a dataset is cheap to import again while a run is not; so the user deletes nothing
    by accident, and is told what holds the dataset.

    Raises:
        NotFound: no such dataset.
        Conflict: something refers to its problems.
    """
    with sessions.begin() as session:
        dataset = _require_dataset(session, name)
        use = repo_datasets.dataset_use(session, dataset_id=dataset.id)
        if use.used:
            held = [
                f"{what} {count}"
                for what, count in (
                    ("bandit contexts:", use.bandit_contexts),
                    ("training groups:", use.training_groups),
                    ("hacking cases:", use.hacking_cases),
                )
                if count
            ]
            if use.runs:
                shown = ", ".join(map(str, use.runs[:10]))
                more = f" and {len(use.runs) - 10} more" if len(use.runs) > 10 else ""
                held.insert(0, f"runs {shown}{more}")
            raise Conflict(
                f"dataset {name!r} is used ({'; '.join(held)}); its results would lose "
                "their problems, so it is kept. Import new problems under another name"
            )
        return repo_datasets.delete_dataset(session, dataset_id=dataset.id)
