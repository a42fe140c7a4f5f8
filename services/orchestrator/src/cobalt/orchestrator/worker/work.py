"""What a carrier carries: one call of a worker entry point, as a plain value.

A `Work` names its entry point (a function of `worker.jobs`), its integer arguments and
its queue id, nothing else: the queue stores it as a job, this process's pool calls it,
recovery rebuilds it from the database. `work_for_run` and `work_for_round` name the calls
that carry out a run or a training round, whichever carrier then takes them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "ENTRY_MODULE",
    "RUN_RETRY_INTERVALS_S",
    "Work",
    "entry_point",
    "group_queue_id",
    "problem_queue_id",
    "work_for_round",
    "work_for_run",
]

ENTRY_MODULE = "cobalt.orchestrator.worker.jobs"
"""The module whose functions the entries name (RQ imports them by this path)."""

RUN_RETRY_INTERVALS_S = (10, 30, 60)
"""Waits before a run job's retries (RQ retries up to COBALT_JOB_RETRIES times)."""

Entry = Literal["run_problem", "run_group"]


@dataclass(frozen=True, slots=True)
class Work:
    """One call of an entry point: `ENTRY_MODULE.<entry>(*args, api_key=...)`."""

    entry: Entry
    args: tuple[int, ...]
    queue_id: str
    """Its RQ job id: enqueueing it again replaces rather than doubles it."""
    retry_intervals_s: tuple[int, ...] = ()

    @property
    def function_path(self) -> str:
        """The entry point's dotted path, as RQ stores it."""
        return f"{ENTRY_MODULE}.{self.entry}"


def entry_point(work: Work) -> Callable[..., dict[str, Any]]:
    """The function `work` calls, found by its path as RQ finds it."""
    function: Callable[..., dict[str, Any]] = getattr(
        importlib.import_module(ENTRY_MODULE), work.entry
    )
    return function


def problem_queue_id(run_id: int, problem_id: int) -> str:
    return f"cobalt-run-{run_id}-problem-{problem_id}"


def group_queue_id(job_id: int, round: int, context_id: int) -> str:
    return f"cobalt-train-{job_id}-{round}-{context_id}"


def work_for_run(run_id: int, problem_ids: Iterable[int]) -> dict[int, Work]:
    """One call per open problem of a run."""
    return {
        problem_id: Work(
            "run_problem",
            (run_id, problem_id),
            problem_queue_id(run_id, problem_id),
            RUN_RETRY_INTERVALS_S,
        )
        for problem_id in problem_ids
    }


def work_for_round(job_id: int, round: int, context_ids: Iterable[int]) -> dict[int, Work]:
    """One call per context of a training round (a small dataset wraps: one call each)."""
    return {
        context_id: Work(
            "run_group", (job_id, context_id, round), group_queue_id(job_id, round, context_id)
        )
        for context_id in dict.fromkeys(context_ids)
    }
