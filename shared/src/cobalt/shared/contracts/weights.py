"""Which weights a policy is (a contract of its own, small: a run's record and the job
page read it, and neither should load the inference service's whole control contract).

What a run records as the policy that produced it, and what the trainer reports for each
step's checkpoint, so the two can be matched.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

__all__ = ["WeightsIdentity"]


class WeightsIdentity(BaseModel):
    """Which weights: where they came from and a digest of what they hold.

    What a run records as the policy that produced it, and what the trainer reports for
    each step's checkpoint, so the two can be matched: by `job` and `step` when the weights
    came from a training job's publish, by `digest` always (a checkpoint copied elsewhere
    and served from there is still the same weights). Policy versions alone cannot: they
    restart at 0 with each server and each job.
    """

    kind: Literal["full", "delta", "adapter", "broadcast"] = Field(
        description="full: a model directory; delta: a step written as the change since the "
        "version before (applied over its chain); adapter: a LoRA adapter over the base "
        "model; broadcast: tensors received over the trainer's process group (no directory)"
    )
    path: str | None = Field(
        default=None, description="The directory the weights came from; null for a broadcast."
    )
    digest: str | None = Field(
        default=None,
        description="`cobalt.shared.weight_identity.weights_digest` of `path` (sampled "
        "sha256); null for a broadcast.",
    )
    job: int | None = Field(default=None, description="The training job that wrote them.")
    step: int | None = Field(default=None, description="Its step that wrote them.")
    version: int | None = Field(
        default=None, description="The policy version recorded beside them (or served as)."
    )
