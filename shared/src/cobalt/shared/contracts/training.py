"""Contracts of training: jobs, the steps the trainer claims and reports, their metrics.

The trainer never touches the database: it claims a step's scored groups from the
orchestrator (`StepClaim` -> `StepBatch`), trains on exactly those token ids, and reports
the step (`StepReport`). Rewards travel as the ledger stores them, so the trainer needs no
executor and no tokenizer of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator

from cobalt.shared.contracts.bounds import DATASET_NAME_CHARS, INT32_MAX, URL_CHARS
from cobalt.shared.contracts.browse import TurnRewardPublic
from cobalt.shared.contracts.hyperparameters import TrainerHyperparameters, TrainingMode
from cobalt.shared.contracts.statuses import TrainingJobStatus
from cobalt.shared.contracts.training_params import (
    TrainingParams,
    TrainingParamsRequest,
    stored_training_params,
)
from cobalt.shared.contracts.weights import WeightsIdentity

__all__ = [
    "GROUP_LIST_MAX",
    "JobCheckpoint",
    "JobLiveness",
    "LedgerGroupPublic",
    "LedgerSamplePublic",
    "RoundStarted",
    "StepBatch",
    "StepClaim",
    "StepPublic",
    "StepGroupsPublic",
    "StepReport",
    "StepRounds",
    "TrainingGroupPublic",
    "TrainerHyperparameters",
    "TrainingJobCreate",
    "TrainingJobPublic",
    "TrainingJobsPublic",
    "TrainingMode",
    "TrainingSamplePublic",
    "group_list_key",
]

GROUP_LIST_MAX = 100_000
"""Newest group ids a job's Redis list keeps: nothing unbounded builds up when no trainer
pops them (the ledger, not the list, is what steps are claimed from)."""


def group_list_key(job_id: int) -> str:
    """The Redis list rollout workers push a job's new group ids on, and its trainer pops
    to wake up and claim (cobalt.trainer.arrivals)."""
    return f"cobalt:training:{job_id}:groups"


class TrainingJobCreate(BaseModel):
    """What `cobalt train start` sends."""

    name: str = Field(min_length=1, max_length=DATASET_NAME_CHARS)
    contexts: str = Field(
        min_length=1, max_length=DATASET_NAME_CHARS, description="the bandit dataset's name"
    )
    model: str = Field(
        min_length=1,
        max_length=URL_CHARS,
        description="the policy model's directory (trainer and inference)",
    )
    mode: TrainingMode = TrainingMode.COBALT
    params: TrainingParamsRequest = Field(
        default_factory=dict,
        description="the mode's settings (`TrainingParams` less `mode`: rollout, the budget "
        "(max_steps, epochs), GRPO in `trainer`, the mode's own); checked when the job is "
        "created, where a setting of another mode is refused by name",
    )


class RoundStarted(BaseModel):
    """A rollout round handed to the workers (or to a thread of the API without Redis)."""

    round: int
    contexts: list[int] = Field(description="the bandit context ids of the round, in order")
    queued: bool = Field(description="true: on the RQ queue; false: running in the API process")


class StepRounds(BaseModel):
    """The rollout rounds a trainer on one step should have begun: the step's own and
    those sampled ahead while it trains. The off-policy window is the orchestrator's rule;
    the trainer starts the rounds it has not started yet, and computes none."""

    step: int
    rounds: list[int] = Field(description="ascending; none past the job's step budget")


class StepPublic(BaseModel):
    step: int
    policy_version: int
    metrics: dict[str, float]
    created_at: datetime | None = None


class JobCheckpoint(BaseModel):
    """A step's published policy and the runs evaluated with it (the job page)."""

    step: int
    policy_version: int
    weights: WeightsIdentity | None = Field(
        default=None, description="the directory the step published (null: not reported)"
    )
    present: bool = Field(
        default=False,
        description="the directory is there as the orchestrator sees it (the trainer keeps "
        "only its newest few: COBALT_TRAINER_KEEP_CHECKPOINTS)",
    )
    serve_command: str | None = Field(
        default=None,
        description="the `cobalt inference serve` line that serves these weights (null: "
        "a delta or an adapter, which no server starts from alone, or not reported)",
    )
    runs: list[int] = Field(
        default_factory=list,
        description="runs whose recorded policy is this step's weights, newest first",
    )


class JobLiveness(StrEnum):
    """Whether a job's trainer is still reporting: a function of the last report's time,
    so a trainer that died shows as stale instead of `running` forever."""

    LIVE = "live"
    STALE = "stale"
    ENDED = "ended"
    """Finished, stopped or failed: nothing more is expected."""


class TrainingJobPublic(BaseModel):
    id: int
    name: str
    mode: str
    status: TrainingJobStatus
    contexts: str | None
    model: str
    params: TrainingParams = Field(description="the job's settings, `mode` included")
    step: int
    policy_version: int
    groups: dict[str, int] = Field(
        description="ledger groups per status: ready, consumed, stale, dropped"
    )
    error: str | None
    created_at: datetime
    steps: list[StepPublic] = Field(default_factory=list)
    checkpoints: list[JobCheckpoint] = Field(
        default_factory=list,
        description="with the steps: each reported step's checkpoint (newest first) and the "
        "runs evaluated with it",
    )
    step_budget: int | None = Field(
        default=None,
        description="the steps the job trains before it is finished (from its max_steps and "
        "epochs); null: no budget, it trains until stopped",
    )
    last_activity_at: datetime | None = Field(
        default=None,
        description="the job's last sign of life: a step reported, a group written, a "
        "status change",
    )
    liveness: JobLiveness = Field(
        default=JobLiveness.LIVE,
        description="live, stale (pending or running but silent longer than "
        "COBALT_TRAINING_STALE_S) or ended",
    )

    @model_validator(mode="before")
    @classmethod
    def _params_of_mode(cls, data: Any) -> Any:
        """Parameters given as a job stores them (no `mode`, maybe other modes' settings
        in an old row) are read for the job's mode."""
        if isinstance(data, dict) and isinstance(data.get("params"), Mapping):
            if "mode" not in data["params"] and isinstance(data.get("mode"), str):
                return {**data, "params": stored_training_params(data["mode"], data["params"])}
        return data


class TrainingJobsPublic(BaseModel):
    items: list[TrainingJobPublic]
    total: int


class StepClaim(BaseModel):
    """The trainer asks for the groups of one step (the same ones on every ask)."""

    groups: int = Field(ge=1, le=INT32_MAX, description="contexts (groups) per step")
    current_version: int = Field(
        ge=0, le=INT32_MAX, description="the policy version the trainer holds"
    )
    max_staleness: int | None = Field(
        default=None,
        ge=0,
        le=INT32_MAX,
        description="ignored: the orchestrator applies the job's own `max_staleness` (the "
        "off-policy window is its rule); accepted so that older trainers' claims still are",
    )


class TrainingSamplePublic(BaseModel):
    """One response to train on. In a multi-turn group, one assistant turn of episode
    `sample_index`: every turn of an episode has the episode's reward, and GRPO normalises
    over episodes, not turns."""

    sample_index: int
    turn: int = 0
    prompt_token_ids: list[int]
    response_token_ids: list[int]
    response_logprobs: list[float]
    # The store's column is `total`: the orchestrator builds these from its rows.
    reward: float = Field(validation_alias=AliasChoices("reward", "total"))
    pass_rate: float


class TrainingGroupPublic(BaseModel):
    """A claimed group; `model_validate(row, from_attributes=True)` reads a stored one."""

    id: int
    context_key: str
    policy_version: int
    phase_seconds: dict[str, float] = Field(
        default_factory=dict, description="the rollout's wall seconds: generate, execute, score"
    )
    samples: list[TrainingSamplePublic]


class StepBatch(BaseModel):
    """A claimed step: ready, with its groups, or not ready yet (ask again later)."""

    step: int
    ready: bool
    stale: int = Field(description="groups dropped at this step for being too stale")
    dropped: int = Field(
        default=0, description="groups dropped for fewer than two responses the sandbox judged"
    )
    masked: int = Field(
        default=0, description="responses masked for sandbox errors (trained and dropped groups)"
    )
    dropped_zero_variance: int = Field(
        default=0, description="groups dropped for equal rewards (jobs that filter them)"
    )
    refill_rounds: int = Field(
        default=0, description="extra batches of contexts the step's round took for them"
    )
    groups: list[TrainingGroupPublic] = Field(default_factory=list)


class StepReport(BaseModel):
    """The trainer's account of a finished step: checkpointed and weights published."""

    model_config = ConfigDict(allow_inf_nan=False)

    step: int = Field(ge=1, le=INT32_MAX)
    policy_version: int = Field(ge=0, le=INT32_MAX)
    metrics: dict[str, float] = Field(default_factory=dict)
    checkpoint: WeightsIdentity | None = Field(
        default=None, description="the policy directory the step published"
    )


class LedgerSamplePublic(BaseModel):
    """One response of a group as a person reads it: text, verdicts, reward, advantage."""

    sample_index: int
    turn: int
    response: str
    response_tokens: int
    verdicts: list[str]
    reward: float = Field(description="the Cobalt reward the trainer trained on")
    pass_rate: float
    advantage: float | None = Field(
        description="GRPO's (r - mean) / (std + 1e-6) over the group's episodes (0 when "
        "every reward is equal, as the trainer has it; None for a group of one)"
    )
    components: TurnRewardPublic


class LedgerGroupPublic(BaseModel):
    """A group of the ledger: one context's n samples at one policy version."""

    id: int
    context_key: str
    problem: str = Field(description="the problem's external id")
    round: int
    policy_version: int
    status: str
    step: int | None
    phase_seconds: dict[str, float]
    reward_mean: float
    reward_std: float
    masked_samples: int = Field(
        default=0, description="responses masked for sandbox errors (not in `samples`)"
    )
    drop_reason: str | None = Field(
        default=None, description="why a `dropped` group is never trained on"
    )
    samples: list[LedgerSamplePublic]


class StepGroupsPublic(BaseModel):
    """The groups a step consumed (or dropped as stale or unjudged), with every sample."""

    job_id: int
    step: int
    groups: list[LedgerGroupPublic]
