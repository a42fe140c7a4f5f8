"""The inference service's control contract (vLLM's OpenAI API is the generation contract).

`POST /v1/policy/weights` loads a checkpoint directory into the running server;
`GET /v1/policy` reports what is serving. Every response of the server carries the
policy version in the `x-cobalt-policy-version` header, so a generation is stamped with
the version of the weights that produced it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "POLICY_VERSION_HEADER",
    "LoadWeightsRequest",
    "LoadWeightsResponse",
    "PolicyStatus",
]

POLICY_VERSION_HEADER = "x-cobalt-policy-version"


class LoadWeightsRequest(BaseModel):
    """Load new weights (same architecture and shapes) from a directory the server can read."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(min_length=1, description="Checkpoint directory, as the server sees it.")
    version: int | None = Field(
        default=None,
        ge=0,
        description=(
            "Policy version of these weights; must exceed the serving version. Unset: the "
            "directory's cobalt-policy.json, else the serving version + 1."
        ),
    )
    check: bool = Field(
        default=True,
        description=(
            "Compare config and tensor names/shapes with the serving model before loading. "
            "Turn off only for checkpoints whose tensor names vLLM maps itself."
        ),
    )


class LoadWeightsResponse(BaseModel):
    version: int
    path: str
    load_s: float = Field(description="Seconds spent loading, after in-flight requests drained.")
    drain_s: float = Field(description="Seconds spent waiting for in-flight requests.")


class PolicyStatus(BaseModel):
    """What the server is serving right now."""

    version: int
    served_name: str
    weights_path: str = Field(description="Directory the serving weights came from.")
    state: Literal["serving", "loading", "broken"]
    loaded_at: datetime
    loads: int = Field(description="Successful weight loads since start.")
    failed_loads: int
    last_error: str | None = None
