"""The sampling settings every rollout takes, defined once: evaluation runs
(`SampleRunRequest`, `RefineRunRequest`, the stored `RunParams`) and training jobs
(`CommonTrainingParams`) inherit them, and `rollouts.sampling.SamplingParams.of` turns
them into a request's decoding settings. A new sampling parameter is a field here and a
line in `SamplingParams` and its request (docs/extending.md).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from cobalt.shared import defaults
from cobalt.shared.contracts.bounds import SEED_MAX

__all__ = ["SamplingSettings"]


class SamplingSettings(BaseModel):
    """Decoding settings of every request of a run or a training job (docs/method.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    temperature: float = Field(
        default=defaults.TEMPERATURE, ge=0, le=2, description="sampling temperature"
    )
    top_p: float = Field(
        default=defaults.TOP_P, gt=0, le=1, description="nucleus sampling's probability mass"
    )
    seed: int | None = Field(
        default=None, ge=-SEED_MAX - 1, le=SEED_MAX, description="sampling seed (per request)"
    )
    stop_at_code_end: bool = Field(
        default=False,
        description="end each answer at the line that closes its code block (the fence "
        "stays in the text, so the reward's format rules read it as before); the prose a "
        "small model writes after its code costs tokens and nothing else",
    )
