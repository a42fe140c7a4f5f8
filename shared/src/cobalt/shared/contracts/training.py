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
from typing import TYPE_CHECKING, Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator

from cobalt.shared import defaults
from cobalt.shared.contracts.bounds import DATASET_NAME_CHARS, INT32_MAX, URL_CHARS
from cobalt.shared.contracts.browse import TurnRewardPublic
from cobalt.shared.contracts.statuses import TrainingJobStatus

if TYPE_CHECKING:  # resolved at the end of this module (training_params imports it)
    from cobalt.shared.contracts.training_params import TrainingParams, TrainingParamsRequest

__all__ = [
    "GROUP_LIST_MAX",
    "JobLiveness",
    "LedgerGroupPublic",
    "LedgerSamplePublic",
    "RoundStarted",
    "StepBatch",
    "StepClaim",
    "StepPublic",
    "StepGroupsPublic",
    "StepReport",
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


class TrainerHyperparameters(BaseModel):
    """GRPO's settings (defaults: docs/method.md's paper values), as a job stores them and the
    trainer reads them; `cobalt.trainer.settings.TrainerSettings` adds `COBALT_TRAINER_*`
    variables on top of the same fields. Each field's docstring is its description (the
    OpenAPI document's and `cobalt train start --help`'s)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    lr: float = Field(default=defaults.LEARNING_RATE, gt=0)
    """AdamW learning rate, constant (no schedule)."""
    weight_decay: float = Field(default=0.01, ge=0)
    """AdamW decoupled weight decay."""
    clip_ratio_low: float = Field(default=0.2, ge=0, lt=1)
    """PPO clip below: the ratio is kept >= 1 - clip_ratio_low."""
    clip_ratio_high: float = Field(default=0.4, ge=0)
    """PPO clip above (clip-higher): the ratio is kept <= 1 + clip_ratio_high."""
    dual_clip: float = Field(default=3.0, gt=1)
    """Dual-clip constant c: for negative advantages the loss is capped at -c * A."""
    kl_coef: float = Field(default=1e-4, ge=0)
    """Weight of the KL-to-reference loss (k2, squared log-ratio); 0 skips the reference."""
    entropy_coef: float = Field(default=0.0, ge=0)
    """Weight of the entropy bonus (the paper uses none)."""
    grad_clip: float = Field(default=1.0, gt=0)
    """Largest global gradient norm before an optimizer update."""
    n_samples: int = Field(default=defaults.SAMPLES_PER_PROBLEM, ge=2, le=1024)
    """Responses sampled per context (the GRPO group size)."""
    contexts_per_step: int = Field(default=defaults.CONTEXTS_PER_STEP, ge=1, le=INT32_MAX)
    """Contexts (groups) per training step."""
    updates_per_step: int = Field(default=2, ge=1, le=INT32_MAX)
    """Optimizer updates per step: the step's groups are split into this many mini-batches."""
    max_prompt_tokens: int = Field(default=10_240, ge=1, le=INT32_MAX)
    """Longest prompt (context) in tokens."""
    max_response_tokens: int = Field(default=defaults.MAX_RESPONSE_TOKENS, ge=1, le=INT32_MAX)
    """Longest sampled response in tokens (the sampler's max_tokens)."""
    micro_batch_tokens: int | None = Field(default=None, ge=1, le=INT32_MAX)
    """Most tokens in one forward/backward (with `share_prompts`, one packed row of
    prompts and their responses; without, rows x the longest row, padding included);
    each update accumulates gradients over as many micro-batches as its mini-batch
    needs, with the same gradient. None: max_prompt_tokens +
    max_response_tokens, the longest row a step can hold. The trainer's memory follows
    this budget, not the batch (`COBALT_TRAINER_MICRO_BATCH_TOKENS` overrides it)."""
    share_prompts: bool = True
    """Score the responses to one prompt in one forward of that prompt: each micro-batch
    is one row of segments (a prompt, then its responses), packed without padding, each
    response attending to its own prompt and itself only. The same log-probabilities,
    loss and gradient as one row per response, for fewer tokens: (n - 1) prompts fewer
    per group of n. False: one right-padded row per response."""
    log_prob_chunk_tokens: int = Field(default=1_024, ge=1, le=INT32_MAX)
    """Response tokens whose full-vocabulary logits exist at once (float32)."""
    compute_dtype: Literal["auto", "float32", "bfloat16"] = "auto"
    """Forward/backward dtype; weights and AdamW moments stay float32. auto: bfloat16 on
    GPUs (FSDP2's mixed-precision policy); on the CPU bfloat16 where it computes bfloat16
    natively, else float32 (cobalt.shared.cpu_dtype)."""
    activation_checkpointing: bool | None = None
    """Recompute each decoder layer's activations in backward instead of keeping them.
    None: on on GPUs, off on the CPU."""
    lora_rank: int | None = Field(default=None, ge=1, le=512)
    """Train a LoRA adapter of this rank (peft) instead of every weight: the base model is
    frozen (in the compute dtype), AdamW covers the adapter only, the reference policy is
    the base with the adapter off, and each step publishes the adapter (megabytes) rather
    than the model. None: full fine-tuning."""
    lora_alpha: float | None = Field(default=None, gt=0)
    """LoRA's scaling numerator (the update is alpha / rank x B A). None: 2 x lora_rank."""
    lora_targets: list[str] | None = Field(default=None, min_length=1)
    """Module names (or suffixes) the adapter wraps. None: every linear layer of the
    decoder ("all-linear": attention q/k/v/o and the MLP; never the output head)."""
    # Off-policy correction (docs/trainer.md, "Off-policy correction"): all off by
    # default, the paper's step (the sampler's log-probabilities are the ratio's
    # denominator, uncorrected).
    recompute_old_log_probs: bool = False
    """Recompute the old policy's log-probabilities with the trainer's weights before the
    step's first update and use them as the PPO ratio's denominator (decoupled PPO); the
    step then logs the mismatch between them and the sampler's (`mismatch_*` metrics).
    One more forward pass (no gradient) over the step's tokens."""
    tis_cap: float | None = Field(default=None, ge=1)
    """Truncated importance sampling: each token's loss is weighted by
    min(pi_old / pi_sampler, tis_cap), per token. Needs `recompute_old_log_probs`.
    None: no weights."""
    mis_threshold: float | None = Field(default=None, gt=1)
    """Masked importance sampling: a token whose pi_old / pi_sampler lies outside
    [1 / mis_threshold, mis_threshold] is left out of the loss (no gradient, not counted
    in the token-mean). Needs `recompute_old_log_probs`. None: no token is masked."""

    @model_validator(mode="after")
    def _mini_batches_split_evenly(self) -> TrainerHyperparameters:
        if self.contexts_per_step % self.updates_per_step:
            raise ValueError(
                f"contexts_per_step ({self.contexts_per_step}) must divide into "
                f"updates_per_step ({self.updates_per_step}) equal mini-batches"
            )
        return self

    @model_validator(mode="after")
    def _longest_row_fits_a_micro_batch(self) -> TrainerHyperparameters:
        longest = self.max_prompt_tokens + self.max_response_tokens
        if self.micro_batch_tokens is not None and self.micro_batch_tokens < longest:
            raise ValueError(
                f"micro_batch_tokens ({self.micro_batch_tokens}) is smaller than the longest "
                f"row a step can hold (max_prompt_tokens + max_response_tokens = {longest}): "
                f"set micro_batch_tokens to at least {longest}, or lower max_prompt_tokens "
                "/ max_response_tokens"
            )
        return self

    @model_validator(mode="after")
    def _lora_settings_need_a_rank(self) -> TrainerHyperparameters:
        if self.lora_rank is None and (self.lora_alpha is not None or self.lora_targets):
            raise ValueError(
                "lora_alpha and lora_targets apply to a LoRA adapter: set lora_rank too "
                "(`cobalt train start --lora-rank 16`)"
            )
        return self

    @model_validator(mode="after")
    def _corrections_need_the_recomputed_old_policy(self) -> TrainerHyperparameters:
        named = [name for name in ("tis_cap", "mis_threshold") if getattr(self, name) is not None]
        if named and not self.recompute_old_log_probs:
            raise ValueError(
                f"{' and '.join(named)} weigh the sampler's tokens by the trainer's old "
                "policy, which the step has only when it recomputes it: set "
                "recompute_old_log_probs to true too"
            )
        return self

    @property
    def off_policy_corrected(self) -> bool:
        """Whether the loss weighs or masks tokens by pi_old / pi_sampler (TIS or MIS)."""
        return self.tis_cap is not None or self.mis_threshold is not None

    @property
    def lora(self) -> bool:
        """Whether the job trains a LoRA adapter rather than every weight."""
        return self.lora_rank is not None

    @property
    def token_budget(self) -> int:
        """Prompt + response tokens in one micro-batch (`micro_batch_tokens` or its default)."""
        return self.micro_batch_tokens or self.max_prompt_tokens + self.max_response_tokens

    @property
    def contexts_per_update(self) -> int:
        """Contexts in one mini-batch (64 with the defaults)."""
        return self.contexts_per_step // self.updates_per_step


class TrainingMode(StrEnum):
    """Which contexts a job trains on: the paper's method and its baselines on one stack."""

    COBALT = "cobalt"
    """Every context of a bandit dataset (partial trajectories with prev_best)."""
    SINGLE_TURN = "single-turn"
    """Only the bandit dataset's turn-0 contexts (problem alone): single-turn GRPO."""
    MULTI_TURN = "multi-turn"
    """Online episodes from the turn-0 contexts: up to `episode_turns` turns with the current
    policy and execution feedback, each episode rewarded by its last turn, the loss on
    every assistant turn (multi-turn online GRPO)."""
    VERPO = "verpo"
    """The multi-turn episodes, each turn rewarded by VeRPO (difficulty-weighted partial
    test passes, weights from the group's executions, mixed with the all-tests outcome)
    and each episode by the mean of its turns' rewards (docs/method.md, "VeRPO")."""


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


class StepPublic(BaseModel):
    step: int
    policy_version: int
    metrics: dict[str, float]
    created_at: datetime | None = None


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
        from cobalt.shared.contracts.training_params import stored_training_params

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
    max_staleness: int = Field(
        ge=0,
        le=INT32_MAX,
        description="largest policy-version lag a sample may have (0: synchronous)",
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


# The parameters' models import this module's TrainerHyperparameters and TrainingMode, so
# they come last; training_params resolves the job contracts' `params` types.
import cobalt.shared.contracts.training_params  # noqa: E402,F401
