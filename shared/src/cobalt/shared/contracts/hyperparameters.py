"""The trainer's GRPO hyperparameters and the training modes: what every mode's
parameters (`training_params`) build on, and what the job contracts (`training`) name.
Imports neither of them, so the two import each other no more."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cobalt.shared import defaults
from cobalt.shared.contracts.bounds import INT32_MAX

__all__ = ["TrainerHyperparameters", "TrainingMode"]


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

    reward_shuffle_seed: int | None = Field(default=None, ge=0, le=INT32_MAX)
    """A control, not a method: permute the rewards within each group (one permutation
    per group, from this seed and the group) before the advantages are computed, so the
    job trains on its own rewards attached to the wrong responses
    (cobalt.shared.reward_shuffle; docs/experiments.md). None: the rewards as sampled."""

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
