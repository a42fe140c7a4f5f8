"""How a step's weights reach the inference service: one `WeightPublisher`, chosen once
when the trainer sets a job up (`choose_publisher`), so the loop never branches on it.

- `DiskPublisher` (the default): the step's policy directory is written every step, and
  the inference service loads it (`serve_checkpoint`); a LoRA job's directory holds its
  adapter (megabytes), which the service loads beside the base. With
  COBALT_TRAINER_FULL_WEIGHTS_EVERY > 1 most directories hold a delta against the version
  before (`checkpoint.py`); one the server refuses (it cannot rebuild the chain) is
  written again whole and loaded.
- `BroadcastPublisher` (COBALT_TRAINER_WEIGHT_BROADCAST, a `WeightBroadcastBackend`):
  the weights go from the trainer straight into vLLM's workers (`weight_sync`); the
  directory is written with the resume state only.

A publisher has two phases, so the loop can time them apart: `write` (the step's
checkpoint directory, or only its name) and `send` (the inference service serves it).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import partial
from typing import Protocol

import torch

from cobalt.shared.clients import InferenceControlClient
from cobalt.shared.contracts.training import TrainerHyperparameters
from cobalt.shared.errors import InvalidInput
from cobalt.shared.weight_delta import is_delta_dir
from cobalt.trainer.checkpoint import Checkpoint, CheckpointStore
from cobalt.trainer.distributed import on_rank_zero
from cobalt.trainer.lora import is_adapter_dir
from cobalt.trainer.settings import TrainerSettings
from cobalt.trainer.weight_sync import broadcast_weights

__all__ = [
    "BroadcastPublisher",
    "DiskPublisher",
    "WeightPublisher",
    "check_publishable",
    "choose_publisher",
    "serve_checkpoint",
]

logger = logging.getLogger(__name__)


class WeightPublisher(Protocol):
    def write(self, *, step: int, policy_version: int, full_save: bool) -> Checkpoint:
        """The step's checkpoint: written now, or named for the resume state to fill."""
        ...

    def send(self, checkpoint: Checkpoint) -> None:
        """Have the inference service serve `checkpoint`'s weights (every rank calls)."""
        ...


def serve_checkpoint(inference: InferenceControlClient | None, checkpoint: Checkpoint) -> int:
    """Have inference serve the checkpoint's weights unless it serves that version or a
    newer one (a replayed step's: it keeps the weights it had); returns the version
    served. A LoRA job's directory is its adapter, loaded over the base."""
    if inference is None:
        return checkpoint.policy_version
    serving = inference.status().version
    if serving >= checkpoint.policy_version:
        return serving
    path, version = str(checkpoint.policy_dir), checkpoint.policy_version
    if is_adapter_dir(checkpoint.policy_dir):
        return inference.load_adapter(path, version=version).version
    return inference.load_weights(path, version=version).version


@dataclass(frozen=True, slots=True)
class DiskPublisher:
    """Through the checkpoint directory, every step (full weights or a LoRA adapter)."""

    store: CheckpointStore
    model: torch.nn.Module
    inference: InferenceControlClient | None

    def write(self, *, step: int, policy_version: int, full_save: bool) -> Checkpoint:
        return self.store.save_weights(step=step, policy_version=policy_version, model=self.model)

    def send(self, checkpoint: Checkpoint) -> None:
        on_rank_zero(partial(self._serve, checkpoint))

    def _serve(self, checkpoint: Checkpoint) -> int:
        try:
            return serve_checkpoint(self.inference, checkpoint)
        except InvalidInput as exc:
            if not is_delta_dir(checkpoint.policy_dir):
                raise
            # The server could not rebuild this version from the chain (a delta missing
            # or corrupted): write it whole, which it loads without the chain.
            logger.warning(
                "inference refused the delta of version %d (%s); writing it whole",
                checkpoint.policy_version, exc,
            )  # fmt: skip
            return serve_checkpoint(self.inference, self.store.rewrite_full(checkpoint, self.model))


@dataclass(frozen=True, slots=True)
class BroadcastPublisher:
    """Straight into vLLM's workers; the directory comes only with the resume state."""

    store: CheckpointStore
    model: torch.nn.Module
    inference: InferenceControlClient | None
    settings: TrainerSettings

    def write(self, *, step: int, policy_version: int, full_save: bool) -> Checkpoint:
        if full_save:
            return self.store.save_weights(
                step=step, policy_version=policy_version, model=self.model
            )
        return Checkpoint(self.store.job_root / f"step-{step}", step, policy_version)

    def send(self, checkpoint: Checkpoint) -> None:
        broadcast_weights(
            self.model,
            inference=self.inference,
            settings=self.settings,
            version=checkpoint.policy_version,
            serve_dtype=self.store.serve_dtype,
        )


def choose_publisher(
    hyper: TrainerHyperparameters,
    settings: TrainerSettings,
    *,
    store: CheckpointStore,
    model: torch.nn.Module,
    inference: InferenceControlClient | None,
) -> WeightPublisher:
    """The job's publisher: broadcast when COBALT_TRAINER_WEIGHT_BROADCAST names a
    backend, else the disk.

    Raises:
        InvalidInput: as `check_publishable`.
    """
    check_publishable(hyper, settings)
    if settings.weight_broadcast is None:
        return DiskPublisher(store, model, inference)
    return BroadcastPublisher(store, model, inference, settings)


def check_publishable(hyper: TrainerHyperparameters, settings: TrainerSettings) -> None:
    """Refuse, before any model loads, a job its publisher could not publish.

    Raises:
        InvalidInput: a LoRA job with a broadcast backend (its adapter is megabytes and
            goes through the directory).
    """
    if hyper.lora and settings.weight_broadcast is not None:
        raise InvalidInput(
            "a LoRA job publishes its adapter (megabytes) through the checkpoint "
            "directory; unset COBALT_TRAINER_WEIGHT_BROADCAST for it"
        )
