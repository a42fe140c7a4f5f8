"""Trainer settings, read from `COBALT_TRAINER_*` environment variables.

Defaults are the paper's GRPO hyperparameters (METHOD.md, "Training"); every one is
configurable. The entry point builds this once and passes it down.
"""

from __future__ import annotations

from pydantic import Field, model_validator
from pydantic_settings import SettingsConfigDict

from cobalt.shared.settings import CobaltSettings

__all__ = ["TrainerSettings"]


class TrainerSettings(CobaltSettings):
    """Everything one GRPO run can be told."""

    model_config = SettingsConfigDict(env_prefix="COBALT_TRAINER_", frozen=True, extra="ignore")

    lr: float = Field(default=1e-6, gt=0)
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
    n_samples: int = Field(default=16, ge=2)
    """Responses sampled per context (the GRPO group size)."""
    contexts_per_step: int = Field(default=128, ge=1)
    """Contexts (groups) per training step."""
    updates_per_step: int = Field(default=2, ge=1)
    """Optimizer updates per step: the step's groups are split into this many mini-batches."""
    max_prompt_tokens: int = Field(default=10_240, ge=1)
    """Longest prompt (context) in tokens."""
    max_response_tokens: int = Field(default=6_144, ge=1)
    """Longest sampled response in tokens."""

    @model_validator(mode="after")
    def _mini_batches_split_evenly(self) -> TrainerSettings:
        if self.contexts_per_step % self.updates_per_step:
            raise ValueError(
                f"contexts_per_step ({self.contexts_per_step}) must divide into "
                f"updates_per_step ({self.updates_per_step}) equal mini-batches"
            )
        return self

    @property
    def contexts_per_update(self) -> int:
        """Contexts in one mini-batch (64 with the defaults)."""
        return self.contexts_per_step // self.updates_per_step
