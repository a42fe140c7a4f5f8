"""Results to take away: run labels, the multi-run table (several runs or models side by
side, per difficulty where the dataset has difficulties). Extend, never rename: scripts
read these (docs/analysis.md, "Results you can take away")."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field, StringConstraints

from cobalt.shared.contracts.runs import RunPublic

__all__ = ["DifficultyCell", "RunLabels", "RunTable", "RunTableRow", "Tag"]

Tag = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=50, pattern=r"^\S+$")
]
"""One word (no spaces), up to 50 characters."""


class RunLabels(BaseModel):
    """What a person says about a run; every field optional (absent: left as is)."""

    model_config = {"extra": "forbid"}

    name: Annotated[str, StringConstraints(strip_whitespace=True, max_length=200)] | None = Field(
        default=None, description='e.g. "baseline"; "" clears it'
    )
    tags: list[Tag] | None = Field(
        default=None, max_length=32, description="replaces the tags (add_tags/remove_tags edit)"
    )
    add_tags: list[Tag] = Field(default_factory=list, max_length=32)
    remove_tags: list[Tag] = Field(default_factory=list, max_length=32)
    notes: str | None = Field(default=None, max_length=20_000, description='"" clears them')


Interval = tuple[float, float]


class DifficultyCell(BaseModel):
    """One run's Pass@1 at its last turn on the problems of one difficulty."""

    problems: int
    pass_at_1: float | None
    interval: Interval | None = None


class RunTableRow(BaseModel):
    run: RunPublic
    problems: int = Field(description="problems with hidden results (0: not evaluated)")
    samples: int
    turns: int
    pass_at_1_first: float | None = Field(description="Pass@1 at turn 0 (null: not measured)")
    pass_at_1_first_interval: Interval | None = None
    pass_at_1_last: float | None = Field(description="Pass@1 at the run's last turn")
    pass_at_1_last_interval: Interval | None = None
    by_difficulty: dict[str, DifficultyCell] = Field(
        default_factory=dict, description="last turn, per difficulty of the dataset"
    )
    unevaluated: str | None = Field(
        default=None, description="when not evaluated: the command that measures it"
    )


class RunTable(BaseModel):
    """Several runs side by side; intervals are 95% (docs/analysis.md)."""

    rows: list[RunTableRow]
    difficulties: list[str] = Field(description="the columns of by_difficulty, in order")
    datasets: list[str]
