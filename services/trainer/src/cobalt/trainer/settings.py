"""The trainer process's settings, from `COBALT_TRAINER_*` environment variables.

Where things are (orchestrator, inference service, checkpoints) and how the process runs
(device, polling, metrics port). GRPO's hyperparameters are not here: they belong to the
job (`cobalt train start --lr ...`, `TrainerHyperparameters`), so every trainer that
resumes a job trains it the same way. The entry point builds this once and passes it down.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import SettingsConfigDict

from cobalt.shared.contracts.inference import WeightBroadcastBackend
from cobalt.shared.contracts.training import TrainerHyperparameters
from cobalt.shared.errors import InvalidInput
from cobalt.shared.settings import CobaltSettings
from cobalt.trainer.allocator import DEFAULT_MMAP_THRESHOLD

__all__ = ["TrainerSettings", "default_checkpoint_dir", "job_hyperparameters"]


def default_checkpoint_dir() -> Path:
    """Checkpoints under the user's data directory, beside the embedded database."""
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "cobalt" / "checkpoints"


class TrainerSettings(CobaltSettings):
    """Everything the trainer process needs besides its job."""

    model_config = SettingsConfigDict(env_prefix="COBALT_TRAINER_", frozen=True, extra="ignore")

    orchestrator_url: str = "http://127.0.0.1:8200"
    """The orchestrator API (`cobalt orchestrator serve`), without /v1."""
    orchestrator_token: SecretStr | None = None
    """Bearer token for the orchestrator: its COBALT_ORCHESTRATOR_WRITE_TOKEN (the trainer
    starts rounds, claims and reports steps), if it has one."""
    orchestrator_outage_s: float = Field(default=300.0, ge=0)
    """Once the job is set up, how long the trainer waits out an orchestrator it cannot
    reach or that answers 503 (its API restarting, its database failing over): each call is
    sent again, after the client's own retries, until this many seconds have passed since
    that call first failed; then it exits "unreachable" (code 3) and a restart resumes. At
    start the client's retries alone apply, so a wrong URL fails within seconds."""
    inference_outage_s: float = Field(default=600.0, ge=0)
    """How long a publish waits out an inference service it cannot reach (one replica
    restarting: loading an 8B model takes minutes), asking again every second; longer, the
    trainer exits "unreachable" (code 3) and a restart resumes. A replica back in time
    loads the version it missed (with COBALT_INFERENCE_CHECKPOINT_DIR, by itself)."""
    checkpoint_outage_s: float = Field(default=300.0, ge=0)
    """How long the trainer waits out a checkpoint volume that refuses its writes (full,
    read-only, over quota), trying each write again with backoff: the trained step is kept
    in memory and goes on once the volume takes it. Longer, it exits 1 naming the volume
    and the reason, and a restart after the fix resumes from the newest resume state."""
    inference_url: str | None = "http://127.0.0.1:8000"
    """The inference service's root (its control path loads the new weights); several
    replicas: their roots separated by commas, or `dns+http://NAME:PORT` for a Kubernetes
    headless Service, resolved at every publish (replicas.py); empty: do not publish
    (train and checkpoint only)."""
    publish_timeout_s: float = Field(default=600.0, gt=0)
    """Longest a publish waits for the replicas to serve a version (every HTTP call of the
    weight sync has it as its timeout); with several, a replica still behind then is named
    and left out of rotation until it catches up on its own, not waited for."""
    inference_token: SecretStr | None = None
    """Bearer token of the inference service's control path, if it has one."""
    checkpoint_dir: Path = Field(default_factory=default_checkpoint_dir)
    """Where step checkpoints go; the inference service must read the same path."""
    keep_checkpoints: int = Field(default=2, ge=2)
    """Newest policy directories kept (older ones are deleted after each new one); at least
    2, since the inference service reads the one it serves when checking the next load.
    The newest complete resume state is kept besides them."""
    save_every: int = 1
    """Write the full resume state (float32 weights, AdamW moments, RNG, step) every this
    many steps, in the background; the weights inference loads are written every step. A
    crash replays at most `save_every - 1` steps (from the ledger, so exactly once holds).
    A setting of the process, not a job hyperparameter: it changes no result, only what a
    crash costs against what the disk takes, which depends on where the trainer runs."""
    full_weights_every: int = Field(default=1, ge=1)
    """Delta weight sync on the disk path: write the full served weights every this many
    policy versions and, between them, only what changed since the previous version (the
    XOR of the bytes, compressed, with checksums; `cobalt.shared.weight_delta`), which the
    inference service rebuilds and loads. 1 (the default): the full weights every step.
    Not used by a LoRA job (its adapter is small) or with a weight broadcast."""
    device: str = "cpu"
    """torch device of the policy and reference ("cuda" on a GPU node)."""
    poll_interval_s: float = Field(default=0.5, gt=0)
    """Seconds between asks for a step whose rollouts are not finished (without Redis)."""
    redis_url: str | None = None
    """The Redis the rollout workers push new group ids to (the orchestrator's
    COBALT_REDIS_URL). Set: the trainer pops them and asks for its step as soon as a group
    lands, and otherwise every 10 polling intervals; unset: it asks every interval."""
    step_timeout_s: float = Field(default=6 * 3600.0, gt=0)
    """Longest wait for one step's rollouts before the trainer gives up with an error."""
    weight_broadcast: WeightBroadcastBackend | None = None
    """Publish each step's weights by broadcast into vLLM's workers over this backend
    (nccl between GPUs; gloo is the CPU twin) instead of a checkpoint directory; the
    policy directory is then written with the resume state only. The inference service
    needs the same COBALT_INFERENCE_WEIGHT_BROADCAST. Unset: the disk path (default)."""
    weight_broadcast_host: str = "127.0.0.1"
    """The address of this trainer (rank 0) that vLLM's workers connect to."""
    weight_broadcast_bind: str = "0.0.0.0"
    """The interface rank 0 listens on for the broadcast's rendezvous."""
    weight_broadcast_port: int = Field(default=29600, ge=1, le=65535)
    """The rendezvous port (a TCPStore) of the broadcast; torchrun's own is 29500."""
    weight_broadcast_timeout_s: float = Field(default=600.0, gt=0)
    """Longest wait for vLLM's workers to join a broadcast (they join after in-flight
    requests drain)."""
    metrics_port: int | None = Field(default=None, ge=1, le=65535)
    """Serve Prometheus metrics on this port (unset: no metrics server)."""
    micro_batch_tokens: int | None = Field(default=None, ge=1)
    """Overrides the job's `micro_batch_tokens` on this machine: memory is the trainer's
    business, and the gradient does not depend on it. Unset: the job's value."""
    malloc_mmap_threshold: int = Field(default=DEFAULT_MMAP_THRESHOLD, ge=0)
    """Bytes from which glibc gives an allocation its own mapping, returned to the system
    when freed; set once at start (`allocator.set_mmap_threshold`). Fixed at 128 KiB,
    resident memory on the CPU follows the bytes tensors use (SmolLM2, 2 groups: 3.65 GiB
    against 4.81 with glibc's rising threshold, docs/benchmarks.md), for 16-31 % more step
    time there (fresh pages are faulted in). 0: glibc's default."""
    python: Path | None = None
    """Interpreter of the trainer environment for `cobalt trainer serve` started elsewhere.
    Unset: `.venv-trainer/bin/python` of this checkout."""

    @field_validator("save_every")
    @classmethod
    def _positive_cadence(cls, value: int) -> int:
        if value < 1:
            raise ValueError(
                f"save_every is {value}: set COBALT_TRAINER_SAVE_EVERY to a whole number of "
                "steps >= 1 (1 writes the resume state after every step, 10 after every 10th)"
            )
        return value


def job_hyperparameters(
    params: dict[str, Any], settings: TrainerSettings
) -> TrainerHyperparameters:
    """The job's GRPO settings with this trainer's overrides, checked before any model
    loads (a budget smaller than the longest row is refused here, with the fix named).

    Raises:
        InvalidInput: the combination is refused; the message says what to change.
    """
    values = dict(params)
    if settings.micro_batch_tokens is not None:
        values["micro_batch_tokens"] = settings.micro_batch_tokens
    try:
        return TrainerHyperparameters.model_validate(values)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "trainer settings"
        override = (
            " (COBALT_TRAINER_MICRO_BATCH_TOKENS is set)" if settings.micro_batch_tokens else ""
        )
        raise InvalidInput(f"the job's {where}{override}: {first['msg']}") from exc
