"""Rollout runs as users start them and see them (REST API, `cobalt run ... --json`).

Field names are fixed (other tools script against them); extend, never rename.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from cobalt.shared import defaults
from cobalt.shared.contracts.bounds import (
    DATASET_NAME_CHARS,
    INT32_MAX,
    MODEL_NAME_CHARS,
    TEMPLATE_NAME_CHARS,
    URL_CHARS,
)
from cobalt.shared.contracts.executor import Compare, Limits
from cobalt.shared.contracts.sampling import SamplingSettings
from cobalt.shared.contracts.statuses import RunKind, RunStatus, TrajectoryStatus
from cobalt.shared.contracts.weights import WeightsIdentity
from cobalt.shared.reward_format import RewardFormat

__all__ = [
    "EvaluationReport",
    "INHERITED_BY_REFINE",
    "REFINE_OWN_SETTINGS",
    "RefineRunRequest",
    "RunParams",
    "RunPublic",
    "MAX_SAMPLES",
    "SampleRunRequest",
    "TemplatesPublic",
    "TrajectoryPublic",
    "TurnPublic",
]


MAX_SAMPLES = 1024
"""Most programs sampled per problem in one run."""


class _Decoding(SamplingSettings):
    """What both run requests take: the sampling settings, the endpoint's key, the
    response's length and the history's rules."""

    model_config = ConfigDict(
        extra="forbid", frozen=False, allow_inf_nan=False, validate_by_name=True
    )

    api_key: SecretStr | None = Field(
        default=None,
        exclude=True,
        description="Key for the model endpoint; sent with the jobs, never stored.",
    )

    max_tokens: int = Field(
        default=defaults.MAX_RESPONSE_TOKENS,
        ge=1,
        le=INT32_MAX,
        description="longest response in tokens",
    )
    stop_on_pass: bool = Field(
        default=False, description="end a trajectory once its program passes every public test"
    )
    think_cap_chars: int = Field(
        default=defaults.HISTORY_CAP_CHARS,
        ge=0,
        le=INT32_MAX,
        description="characters of an answer (after </think>) the history keeps",
    )
    reward_format: RewardFormat = Field(
        default=RewardFormat.REASONING,
        description="the reward's format rules for the model that writes the run: reasoning "
        "(the paper's: one </think>) or instruct (no thinking block); evaluation scores every "
        "turn with them, as a training job with the same setting does (docs/reward.md)",
    )


class RunParams(SamplingSettings):
    """The rollout settings a run stores when it is created (`Run.params`, written as
    `model_dump(mode="json")`), as its jobs, its reports and the REST contract read them.

    Read with `model_validate`: unknown keys (rows written before this model) are ignored,
    and keys a hand-written or old row lacks take their defaults.
    """

    model_config = ConfigDict(
        extra="ignore",
        frozen=True,
        allow_inf_nan=False,
        validate_by_name=True,
        serialize_by_alias=True,
    )

    n: int = Field(default=1, ge=1, le=MAX_SAMPLES, description="programs per problem")
    max_tokens: int = Field(default=defaults.MAX_RESPONSE_TOKENS, ge=1, le=INT32_MAX)
    feedback_turns: int = Field(
        default=0, ge=0, alias="turns", description="feedback turns after turn 0"
    )
    """Stored and shown as `turns`, the requests' name (scripts read it)."""
    stop_on_pass: bool = False
    think_cap_chars: int = Field(default=defaults.HISTORY_CAP_CHARS, ge=0)
    reward_format: RewardFormat = RewardFormat.REASONING
    """The rules its turns are scored with; rows written before it was stored: reasoning,
    the rules they were scored with then."""
    limits: Limits = Field(default_factory=Limits)
    compare: Compare = Compare.COBALT
    problems: int | None = Field(
        default=None,
        ge=0,
        description="the dataset's first N problems the run samples (null: a run created "
        "whole, before trajectories were written by its first job)",
    )

    @field_validator("limits", mode="before")
    @classmethod
    def _no_limits(cls, value: object) -> object:
        return {} if value is None else value


class SampleRunRequest(_Decoding):
    """n programs per problem at turn 0 (and, with `turns` > 0, feedback turns after it).

    `feedback_turns` counts the turns after turn 0, as a run's `RunParams` does; requests
    and stored rows name it `turns` (scripts send it)."""

    dataset: str = Field(
        min_length=1, max_length=DATASET_NAME_CHARS, description="the dataset (`cobalt data list`)"
    )
    base_url: str = Field(
        min_length=1, max_length=URL_CHARS, description="OpenAI-compatible base URL, up to /v1"
    )
    model: str = Field(
        min_length=1, max_length=MODEL_NAME_CHARS, description="the model's name at that URL"
    )
    n: int = Field(
        default=defaults.SAMPLES_PER_PROBLEM,
        ge=1,
        le=MAX_SAMPLES,
        description="programs per problem at turn 0",
    )
    feedback_turns: int = Field(
        default=0, ge=0, le=64, alias="turns", description="feedback turns after turn 0"
    )
    template: str = Field(
        default="default",
        min_length=1,
        max_length=TEMPLATE_NAME_CHARS,
        description="a template name from the server's registry (GET /v1/templates); "
        "the CLI, which runs on the user's machine, also takes a .toml file path",
    )
    limit: int | None = Field(
        default=None, ge=1, le=INT32_MAX, description="only the first N problems"
    )
    compare: Compare | None = Field(
        default=None,
        description="judge preset; default: the dataset's (its import's `judge`), else cobalt",
    )
    limits: Limits | None = Field(
        default=None, description="default: the judge preset's reference limits"
    )


class RefineRunRequest(_Decoding):
    """`turns` (`feedback_turns`) feedback turns continuing a finished sample run's turn-0
    programs.

    A setting the request leaves out (not in `model_fields_set`: a JSON body without the
    key, a CLI option not given) is the sample run's (`INHERITED_BY_REFINE`); one it gives,
    even at the default shown here, overrides it. `REFINE_OWN_SETTINGS` are the refine
    run's own and take the defaults below. Every field is flat: the run is judged with the
    sample run's `limits` and `compare`, which no request changes (its feedback turns are
    judged as the turn 0 they continue), so no nested object has to be merged.
    """

    from_run: int = Field(
        ge=1, le=INT32_MAX, description="the finished sample run whose turn 0 it continues"
    )
    feedback_turns: int = Field(
        default=defaults.EVALUATION_FEEDBACK_TURNS,
        ge=1,
        le=64,
        alias="turns",
        description="feedback turns after turn 0",
    )
    base_url: str | None = Field(
        default=None, min_length=1, max_length=URL_CHARS, description="default: the sample run's"
    )
    model: str | None = Field(
        default=None,
        min_length=1,
        max_length=MODEL_NAME_CHARS,
        description="default: the sample run's",
    )


REFINE_OWN_SETTINGS = frozenset({"feedback_turns", "stop_on_pass"})
"""A refine run's stored settings that are not its sample run's: unset, they take
`RefineRunRequest`'s defaults (a sample run mostly has no feedback turns to go by)."""

INHERITED_BY_REFINE = (
    frozenset(RunParams.model_fields) & frozenset(RefineRunRequest.model_fields)
) - REFINE_OWN_SETTINGS
"""The stored settings (decoding, response length, history cap) a refine run takes from
its sample run unless its request gives them; a new sampling setting joins by itself."""


class TurnPublic(BaseModel):
    turn_index: int
    messages: list[dict[str, Any]]
    raw_response: str
    stored_response: str
    code: str | None
    public_verdicts: list[str]
    public_passed: bool
    feedback: str
    hidden_verdicts: list[str] | None = None
    hidden_passed: bool | None = None
    prompt_tokens: int
    completion_tokens: int
    model_latency_ms: float
    exec_latency_ms: float
    model: str
    policy_version: int | None
    finish_reason: str | None


class TrajectoryPublic(BaseModel):
    problem: str = Field(description="the problem's external id")
    sample_index: int
    status: TrajectoryStatus
    error: str | None
    turns: list[TurnPublic] = Field(default_factory=list)


class RunPublic(BaseModel):
    id: int
    kind: RunKind
    status: RunStatus
    dataset: str
    parent_run_id: int | None
    base_url: str
    model: str
    params: RunParams
    template_name: str
    template_sha256: str
    total_trajectories: int
    trajectories_by_status: dict[str, int]
    turns_written: int
    policy_versions: list[int] = Field(
        default_factory=list,
        description="the trainer's weights versions that wrote the run's turns (sorted; "
        "empty when the endpoint is not Cobalt's inference service)",
    )
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    error: str | None
    name: str | None = Field(default=None, description="what people call the run")
    tags: list[str] = Field(default_factory=list)
    notes: str | None = None
    policy: WeightsIdentity | None = Field(
        default=None,
        description="the weights that produced the run, as the inference service reported "
        "them when it started (null: the endpoint does not report them)",
    )
    trajectories: list[TrajectoryPublic] | None = None


class EvaluationReport(BaseModel):
    """Hidden-test results of every turn: Pass@1 per turn (not best-so-far) and pass@k."""

    run_id: int
    problems: int
    samples: int = Field(description="trajectories per problem (n)")
    turns: int = Field(description="turns evaluated, turn 0 included")
    pass_at_1: list[float] | None = Field(
        description="per turn, averaged over problems; null when no problem has a hidden "
        "result yet (`unevaluated` names the command that measures it)"
    )
    pass_at_1_interval: list[tuple[float, float] | None] | None = Field(
        default=None,
        description="per turn, the 95% interval of Pass@1: a seeded bootstrap over "
        "problems and their samples (docs/analysis.md); null when nothing was measured",
    )
    pass_at_k: dict[str, list[float]] = Field(description='per k ("5", ...), per turn')
    public_pass_at_1: list[float] | None = Field(
        description="the same on the public tests (null with pass_at_1)"
    )
    failed_trajectories: int
    sandbox_errors: int = Field(
        default=0,
        description="turns the sandbox failed to judge (sandbox_error after retries): not "
        "failures; their problems are left out of the rates until `cobalt run evaluate` "
        "judges them",
    )
    unevaluated: str | None = Field(
        default=None,
        description="when no problem has a hidden result: the command that measures them",
    )
    turns_without_feedback: int = Field(
        default=0,
        description="feedback turns (after turn 0) of problems without a public test: the "
        "feedback before each said that no public test ran, so they had nothing to act on",
    )
    mean_reward: list[float | None] | None = Field(
        default=None,
        description="mean Cobalt reward of the turns at each turn index (turn_rewards); "
        "None when the run's rewards were not scored (no tokenizer given)",
    )


class TemplatesPublic(BaseModel):
    """The prompt templates a request may name."""

    names: list[str]
