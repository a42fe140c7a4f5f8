"""Read-only views for people looking at experiments (the web UI and scripts alike).

Everything here is derived from stored rows: a run's problems with their outcomes, one
problem's trajectories turn by turn with diffs and rewards, stored problems and bandit
contexts page by page, hacking cases with the judges' categories, and full-text search.
Field names are fixed once released (other tools script against them); extend, never rename.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cobalt.shared.contracts.runs import EvaluationReport, RunPublic, TurnPublic
from cobalt.shared.contracts.statuses import TrajectoryStatus
from cobalt.shared.reward_format import RewardFormat

__all__ = [
    "BanditContextPublic",
    "BanditContextsPage",
    "BanditDatasetParams",
    "BanditDatasetPublic",
    "BanditMix",
    "BanditDatasetsPublic",
    "ComparedProblem",
    "ComparedTurn",
    "DifferenceVerdict",
    "HackingCasePublic",
    "HackingCasesPublic",
    "JudgeVerdictPublic",
    "ProblemOutcome",
    "ProblemSummary",
    "ProblemsPage",
    "RunProblemDetail",
    "RunProblemRow",
    "RunComparison",
    "RunProblemsPublic",
    "SearchHit",
    "SearchKind",
    "SearchResults",
    "TestCaseDetail",
    "TurnMatch",
    "TurnMatchesPage",
    "TurnTests",
    "TrajectoryDetail",
    "TurnChange",
    "TurnDetail",
    "TurnRewardPublic",
]


class ProblemOutcome(StrEnum):
    """How a problem ended in a run, by its trajectories' last programs on the hidden tests."""

    SOLVED = "solved"
    """Every trajectory's last program passes every hidden test."""
    PARTIAL = "partial"
    """Some do, some do not."""
    UNSOLVED = "unsolved"
    """None does."""
    UNEVALUATED = "unevaluated"
    """No hidden results yet (`cobalt run evaluate`), or the problem has no hidden tests."""


class RunProblemRow(BaseModel):
    """One problem of a run: the row of the run's per-problem table."""

    problem_id: int
    external_id: str
    difficulty: str | None
    samples: int = Field(description="trajectories of the problem in the run")
    turns: int = Field(description="most turns any of its trajectories has")
    failed: int = Field(description="trajectories that failed")
    hidden_pass_first: float | None = Field(
        description="fraction of trajectories whose turn-0 program passes the hidden tests"
    )
    hidden_pass_last: float | None = Field(
        description="the same for each trajectory's last program"
    )
    hidden_pass_first_interval: tuple[float, float] | None = Field(
        default=None, description="Wilson 95% interval of hidden_pass_first"
    )
    hidden_pass_last_interval: tuple[float, float] | None = Field(
        default=None, description="Wilson 95% interval of hidden_pass_last"
    )
    public_pass_last: float | None = Field(
        description="last programs passing the public tests (null: no turn written yet)"
    )
    mean_reward: float | None = Field(description="mean Cobalt reward of its scored turns")
    flagged: int = Field(description="turns flagged as possible reward hacking")
    outcome: ProblemOutcome


class RunProblemsPublic(BaseModel):
    run_id: int
    items: list[RunProblemRow]
    total: int


class TurnRewardPublic(BaseModel):
    """The stored Cobalt reward of a turn, component by component (docs/reward.md)."""

    total: float
    total_before_clip: float
    validation_reward: float
    pass_rate: float
    prev_best: float
    tests_passed: int
    tests_total: int
    no_code: bool
    correctness: float | None = None
    improvement: float | None = None
    improvement_rule: str | None = None
    format: float | None = None
    format_violations: list[str] = Field(default_factory=list)
    think_tokens: int | None = None
    answer_tokens: int | None = None


class TurnDetail(TurnPublic):
    """A turn as a person reads it: the reasoning apart, the change from the last program."""

    turn_id: int = Field(description="the stored turn (GET .../turns/{turn_id}/tests)")
    reasoning: str = Field(description="the response up to its last </think> (tags removed)")
    answer: str = Field(description="the response after it (`extraction.answer_part`)")
    diff: str | None = Field(
        description="unified diff of this turn's program against the previous turn's; "
        "None at turn 0 or when either turn has no program"
    )
    reward: TurnRewardPublic | None = None
    hacking_case_id: int | None = Field(
        default=None, description="the stored hacking case when the turn was flagged"
    )


class TrajectoryDetail(BaseModel):
    sample_index: int
    status: TrajectoryStatus
    error: str | None
    turns: list[TurnDetail]


class RunProblemDetail(BaseModel):
    """One problem of a run with every trajectory in full."""

    run_id: int
    problem_id: int
    dataset: str
    external_id: str
    difficulty: str | None
    statement: str
    public_tests: int
    hidden_tests: int
    swapped_tests: list[int] = Field(
        default_factory=list, description="positions of perturbed public tests (if any)"
    )
    reward_format: RewardFormat = Field(
        default=RewardFormat.REASONING,
        description="the format rules the run's rewards are scored with (its params')",
    )
    trajectories: list[TrajectoryDetail]


class ProblemSummary(BaseModel):
    """A stored problem in a listing (the full problem: GET .../problems/{external_id})."""

    id: int
    external_id: str
    difficulty: str | None
    test_style: str
    public_tests: int
    hidden_tests: int
    perturbed: bool
    statement_start: str = Field(description="the statement's first 200 characters")


class ProblemsPage(BaseModel):
    dataset: str
    items: list[ProblemSummary]
    total: int = Field(description="problems matching the filter, over all pages")
    offset: int
    difficulties: list[str] = Field(description="every difficulty in the dataset, sorted")


class BanditMix(BaseModel):
    """Contexts of another bandit dataset mixed into a build: `ratio` of them per own one."""

    model_config = ConfigDict(frozen=True)

    name: str
    ratio: float


class BanditDatasetParams(BaseModel):
    """Every setting a bandit dataset was built with (`cobalt bandit build`), stored with it
    (`BanditDataset.params`).

    Rows written before a setting existed read with the value every build had then: one
    context per problem's first stop at turns (0, 1), no research validation, and no
    turn-0-only request. Unknown keys are ignored.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    validation: bool = Field(description="one context per problem (a validation set)")
    keep: int = Field(description="trajectories kept per problem (max-variance down-sampling)")
    context_turns: tuple[int, ...] = Field(description="assistant turns contexts are cut after")
    max_prompt_tokens: int = Field(description="the cap on a rendered context's tokens")
    seed: int = Field(description="the seed of the selection and the shuffle")
    mix: tuple[BanditMix, ...] = Field(description="other bandit datasets mixed in")
    tokenizer: str = Field(description="where the token counter came from")
    first_stop_turns: tuple[int, int] = Field(
        default=(0, 1),
        description="turns whose both passing everything stops a trajectory at its first context",
    )
    research_validation: bool = Field(
        default=False, description="validation contexts as the research script cut them"
    )
    turn_zero_only: bool = Field(
        default=False, description="built from a run without feedback turns, on request"
    )


class BanditDatasetPublic(BaseModel):
    """A bandit dataset with the builder's per-rule kept/dropped counts (`counts`)."""

    id: int
    name: str
    split: str
    source_run_id: int
    contexts: int
    params: BanditDatasetParams
    counts: dict[str, Any]
    created_at: datetime


class BanditDatasetsPublic(BaseModel):
    items: list[BanditDatasetPublic]
    total: int


class BanditContextPublic(BaseModel):
    position: int
    problem: str = Field(description="the problem's external id")
    assistant_turns: int
    prev_best: float
    prompt_tokens: int
    trajectory_id: int | None
    mixed_from: str | None = Field(description="the bandit dataset it was mixed in from")
    messages: list[dict[str, Any]]


class BanditContextsPage(BaseModel):
    dataset: str
    items: list[BanditContextPublic]
    total: int
    offset: int


class JudgeVerdictPublic(BaseModel):
    judge_model: str
    category: str
    category_label: str = Field(description="what the category means (analysis.judge)")


class HackingCasePublic(BaseModel):
    id: int
    run_id: int
    problem: str = Field(description="the problem's external id")
    sample_index: int
    turn_index: int
    shown_test: int
    swapped_tests: list[int]
    feedback: str
    diff: str
    hidden_pass_before: float | None
    hidden_pass_after: float | None
    verdicts: list[JudgeVerdictPublic]


class HackingCasesPublic(BaseModel):
    items: list[HackingCasePublic]
    total: int
    categories: dict[str, dict[str, int]] = Field(
        description="judge model -> category -> cases (analysis.cases.verdict_counts)"
    )
    unjudged: int = Field(description="cases no judge has categorised yet")


class SearchKind(StrEnum):
    PROBLEMS = "problems"
    RESPONSES = "responses"


class SearchHit(BaseModel):
    kind: SearchKind
    dataset: str
    external_id: str
    run_id: int | None = None
    sample_index: int | None = None
    turn_index: int | None = None
    snippet: str


class SearchResults(BaseModel):
    query: str
    method: str = Field(description='"postgresql-fts" or "like" (SQLite)')
    items: list[SearchHit]


class DifferenceVerdict(StrEnum):
    """What the paired 95% interval of a Pass@1 difference over a set of problems says
    (`analysis.statistics.difference_verdict`)."""

    BETTER = "better"
    """The interval lies above 0."""
    WORSE = "worse"
    """The interval lies below 0."""
    WITHIN_NOISE = "within_noise"
    """The interval holds 0."""
    TOO_FEW_PROBLEMS = "too_few_problems"
    """Fewer problems than a verdict needs: the bootstrap resamples problems, so over a
    handful its interval shows their samples' noise, not how problems differ."""


class TurnChange(StrEnum):
    """How a problem's Pass@1 at one turn moved from run A (the baseline) to run B."""

    FIXED = "fixed"
    """B passes more of its samples than A, by more than the noise of so few samples: the
    95% interval of the difference (Newcombe's, docs/analysis.md) is above 0 (0/4 -> 4/4)."""
    BROKEN = "broken"
    """B passes fewer, beyond the noise (the interval is below 0)."""
    UNCHANGED = "unchanged"
    """The same fraction."""
    WITHIN_NOISE = "within_noise"
    """A different fraction, but within the noise: the interval holds 0 (1/4 -> 2/4)."""
    UNEVALUATED = "unevaluated"
    """Either run has no hidden result for the problem at that turn."""


class ComparedTurn(BaseModel):
    turn_index: int
    pass_a: float | None = Field(description="run A's Pass@1 on the problem at this turn")
    pass_b: float | None = Field(description="run B's")
    change: TurnChange
    difference_interval: tuple[float, float] | None = Field(
        default=None, description="95% interval of pass_b - pass_a (null when unevaluated)"
    )


class ComparedProblem(BaseModel):
    """One problem of the shared dataset in both runs, turn by turn."""

    external_id: str
    difficulty: str | None
    turns: list[ComparedTurn]
    change: TurnChange = Field(description="the change at the last turn both runs have")


class RunComparison(BaseModel):
    """Two runs over the same dataset, problem by problem and turn by turn.

    Rates follow evaluation's rules (runs.evaluation): a trajectory that stopped early
    keeps its last program; problems without hidden results in a run are unevaluated.
    """

    run_a: RunPublic
    run_b: RunPublic
    report_a: EvaluationReport
    report_b: EvaluationReport
    turns: int = Field(description="turns of the longer run, turn 0 included")
    counts: list[dict[str, int]] = Field(description="per turn: problems per `TurnChange`")
    problems: list[ComparedProblem]
    difference: list[float | None] = Field(
        default_factory=list,
        description="per turn, Pass@1 of B minus A over the problems both evaluated "
        "(null at a turn where none is)",
    )
    difference_interval: list[tuple[float, float] | None] = Field(
        default_factory=list,
        description="per turn, its 95% interval: a seeded bootstrap over the problems both "
        "runs evaluated (paired)",
    )
    paired_problems: list[int] = Field(
        default_factory=list,
        description="per turn, how many problems both runs evaluated (the difference's base)",
    )
    verdict: list[DifferenceVerdict | None] = Field(
        default_factory=list,
        description="per turn, what the interval says of B against A: better, worse, "
        "within_noise, or too_few_problems (under 10 shared problems); null where none is",
    )


class TestCaseDetail(BaseModel):
    """One test of a turn: what went in, what was expected, what the program did.

    Input and expected output are middle-truncated to 4,096 characters; actual output and
    error are as the executor returned them (capped at its `stream_chars`). A call test's
    input is the call and its values are Python literals, as in the feedback.
    """

    __test__ = False

    kind: str = Field(description='"public" or "hidden"')
    index: int = Field(description="position in the problem's list of that kind, from 0")
    verdict: str | None = Field(description="None: not run (hidden tests before evaluation)")
    input: str
    expected: str = ""
    actual: str | None = Field(
        default=None, description="stdout, or the returned value; None when not stored"
    )
    error: str | None = Field(
        default=None, description="stderr, else the executor's explanation; None: not stored"
    )
    exit_code: int | None = None
    wall_ms: float | None = None


class TurnTests(BaseModel):
    """Every public and hidden test of one turn with its verdict and outputs."""

    turn_id: int
    run_id: int
    external_id: str
    sample_index: int
    turn_index: int
    public: list[TestCaseDetail]
    hidden: list[TestCaseDetail]


class TurnMatch(BaseModel):
    """A turn found by the trajectory filters, with what the filters look at."""

    turn_id: int
    external_id: str
    difficulty: str | None
    sample_index: int
    turn_index: int
    public_verdicts: list[str]
    public_passed: bool
    hidden_verdicts: list[str] | None
    hidden_passed: bool | None
    reward: TurnRewardPublic | None


class TurnMatchesPage(BaseModel):
    run_id: int
    items: list[TurnMatch]
    total: int = Field(description="turns matching the filters, over all pages")
    offset: int
