"""How a step's weights reach the inference service: one `WeightPublisher`, chosen once
when the trainer sets a job up (`choose_publisher`), so the loop never branches on it.

- `DiskPublisher` (the default): the step's policy directory is written every step, and
  every inference replica loads it (`serve_checkpoint`, fanned out by replicas.py); a
  LoRA job's directory holds its adapter (megabytes), which the service loads beside the
  base. With COBALT_TRAINER_FULL_WEIGHTS_EVERY > 1 most directories hold a delta against
  the version before (`checkpoint.py`); one a server refuses (it cannot rebuild the chain)
  is written again whole and loaded.
- `BroadcastPublisher` (COBALT_TRAINER_WEIGHT_BROADCAST, a `WeightBroadcastBackend`):
  the weights go from the trainer straight into vLLM's workers (`weight_sync`); the
  directory is written with the resume state only. One replica only (refused at set-up
  with several: `check_publishable`).

A publisher has two phases, so the loop can time them apart: `write` (the step's
checkpoint directory, or only its name) and `send` (the inference service serves it).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Protocol

import torch

from cobalt.shared.checkpoints import PUBLISHED_FILE, PublishedPolicy, write_published
from cobalt.shared.clients import InferenceControlClient
from cobalt.shared.contracts.training import TrainerHyperparameters
from cobalt.shared.contracts.weights import WeightsIdentity
from cobalt.shared.errors import CobaltError, InvalidInput
from cobalt.shared.weight_delta import is_delta_dir
from cobalt.shared.weight_identity import describe_weights
from cobalt.trainer.checkpoint import Checkpoint, CheckpointStore, latest_weights, partial_of
from cobalt.trainer.distributed import on_rank_zero
from cobalt.trainer.lora import is_adapter_dir
from cobalt.trainer.outages import through_outage
from cobalt.trainer.replicas import InferenceReplicas
from cobalt.trainer.settings import TrainerSettings
from cobalt.trainer.volume import write_patiently
from cobalt.trainer.weight_sync import broadcast_weights

__all__ = [
    "BroadcastPublisher",
    "DiskPublisher",
    "WeightPublisher",
    "check_publishable",
    "choose_publisher",
    "load_into_replica",
    "Patience",
    "published_weights",
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

    def catch_up(self, version: int) -> dict[str, int]:
        """Rank 0 alone, while a step waits for rollouts: bring the replicas that serve
        an older version than `version` back to it; returns those found behind."""
        ...


@dataclass(frozen=True, slots=True)
class Patience:
    """How long a publish waits out what it depends on (settings.py): the inference
    service down (outages.py), the checkpoint volume refusing the record (volume.py)."""

    inference_s: float = 0.0
    volume_s: float = 0.0

    @classmethod
    def of(cls, settings: TrainerSettings) -> Patience:
        return cls(settings.inference_outage_s, settings.checkpoint_outage_s)


def serve_checkpoint(
    inference: InferenceReplicas | None, checkpoint: Checkpoint, *, patience: Patience
) -> int:
    """Have every inference replica serve the checkpoint's weights (replicas.py), then
    record it as the job's newest published policy (`published.json` at the checkpoint
    root: a replica that starts later, or missed this publish, loads it before it answers
    ready); returns the lowest version a replica serves now.

    A replica that serves that version or a newer one keeps what it has (a replayed step).
    A LoRA job's directory is its adapter, loaded over the base.
    """
    if inference is None:
        return checkpoint.policy_version
    outcome = through_outage(
        partial(
            inference.publish, checkpoint.policy_version, partial(load_into_replica, checkpoint)
        ),
        outage_s=patience.inference_s,
        interval_s=1.0,
        what="the inference service",
    )
    root = checkpoint.path.parent.parent
    record = PublishedPolicy(
        job=_job_of(checkpoint),
        version=checkpoint.policy_version,
        step=checkpoint.step,
        path=str(checkpoint.policy_dir),
    )
    write_patiently(
        partial(write_published, root, record),
        directory=root,
        outage_s=patience.volume_s,
        what=f"the record of version {checkpoint.policy_version}",
        clean_up=partial_of(root / f".{PUBLISHED_FILE}.partial"),
    )
    return min(outcome.served.values())


def load_into_replica(checkpoint: Checkpoint, replica: InferenceControlClient) -> int:
    """One replica: load the checkpoint unless it serves that version or a newer one."""
    serving = replica.status().version
    if serving >= checkpoint.policy_version:
        return serving
    path, version = str(checkpoint.policy_dir), checkpoint.policy_version
    if is_adapter_dir(checkpoint.policy_dir):
        return replica.load_adapter(path, version=version).version
    return replica.load_weights(path, version=version).version


def _job_of(checkpoint: Checkpoint) -> int:
    """The job id of a checkpoint under `job-<id>/step-<k>` (checkpoint.py's layout)."""
    return int(checkpoint.path.parent.name.removeprefix("job-"))


@dataclass(frozen=True, slots=True)
class DiskPublisher:
    """Through the checkpoint directory, every step (full weights or a LoRA adapter)."""

    store: CheckpointStore
    model: torch.nn.Module
    inference: InferenceReplicas | None
    patience: Patience = Patience()

    def write(self, *, step: int, policy_version: int, full_save: bool) -> Checkpoint:
        return self.store.save_weights(step=step, policy_version=policy_version, model=self.model)

    def send(self, checkpoint: Checkpoint) -> None:
        on_rank_zero(partial(self._serve, checkpoint, self.patience))

    def catch_up(self, version: int) -> dict[str, int]:
        """A replica restarted on its base weights serves version 0 (or a replica missed
        publishes): without COBALT_INFERENCE_CHECKPOINT_DIR nothing else reloads it, and
        the workers refuse its samples as stale, so the step would wait for ever. Such
        replicas are published the newest policy directory again, in one try (the next
        look tries again)."""
        if self.inference is None:
            return {}
        behind = self.inference.behind(version)
        if not behind:
            return {}
        newest = latest_weights(self.store.root, self.store.job_id)
        if newest is None or newest.policy_version != version:
            logger.warning(
                "inference replicas %s serve older versions than the policy's %d, and no "
                "policy directory of that version is on disk to load into them",
                behind,
                version,
            )
            return behind
        logger.warning(
            "inference replicas %s serve older versions than the policy's %d (restarted?): "
            "loading step %d's weights into them",
            behind,
            version,
            newest.step,
        )
        try:
            self._serve(newest, replace(self.patience, inference_s=0.0))
        except CobaltError as exc:
            logger.warning("the catch-up of version %d failed for now: %s", version, exc)
        return behind

    def _serve(self, checkpoint: Checkpoint, patience: Patience) -> int:
        try:
            return serve_checkpoint(self.inference, checkpoint, patience=patience)
        except InvalidInput as exc:
            if not is_delta_dir(checkpoint.policy_dir):
                raise
            # The server could not rebuild this version from the chain (a delta missing
            # or corrupted): write it whole, which it loads without the chain.
            logger.warning(
                "inference refused the delta of version %d (%s); writing it whole",
                checkpoint.policy_version,
                exc,
            )
            rewritten = self.store.rewrite_full(checkpoint, self.model)
            return serve_checkpoint(self.inference, rewritten, patience=patience)


@dataclass(frozen=True, slots=True)
class BroadcastPublisher:
    """Straight into vLLM's workers; the directory comes only with the resume state."""

    store: CheckpointStore
    model: torch.nn.Module
    inference: InferenceReplicas | None
    settings: TrainerSettings

    def write(self, *, step: int, policy_version: int, full_save: bool) -> Checkpoint:
        if full_save:
            return self.store.save_weights(
                step=step, policy_version=policy_version, model=self.model
            )
        return Checkpoint(self.store.job_root / f"step-{step}", step, policy_version)

    def catch_up(self, version: int) -> dict[str, int]:
        """A broadcast is a collective of every rank, which rank 0 cannot start alone
        while it waits: a replica that fell behind is named, and catches up at the next
        publish (or by COBALT_INFERENCE_CHECKPOINT_DIR from the resume states)."""
        if self.inference is None:
            return {}
        behind = self.inference.behind(version)
        if behind:
            logger.warning(
                "inference replicas %s serve older versions than the policy's %d; a weight "
                "broadcast cannot reach them before the next step",
                behind,
                version,
            )
        return {}

    def send(self, checkpoint: Checkpoint) -> None:
        broadcast_weights(
            self.model,
            inference=self.inference,
            settings=self.settings,
            version=checkpoint.policy_version,
            serve_dtype=self.store.serve_dtype,
            origin=(self.store.job_id, checkpoint.step),
        )


def choose_publisher(
    hyper: TrainerHyperparameters,
    settings: TrainerSettings,
    *,
    store: CheckpointStore,
    model: torch.nn.Module,
    inference: InferenceReplicas | None,
) -> WeightPublisher:
    """The job's publisher: broadcast when COBALT_TRAINER_WEIGHT_BROADCAST names a
    backend, else the disk.

    Raises:
        InvalidInput: as `check_publishable`.
    """
    check_publishable(hyper, settings)
    if settings.weight_broadcast is None:
        return DiskPublisher(store, model, inference, Patience.of(settings))
    return BroadcastPublisher(store, model, inference, settings)


def check_publishable(hyper: TrainerHyperparameters, settings: TrainerSettings) -> None:
    """Refuse, before any model loads, a job its publisher could not publish.

    Raises:
        InvalidInput: a LoRA job with a broadcast backend (its adapter is megabytes and
            goes through the directory); a broadcast to several inference replicas.
    """
    if settings.weight_broadcast is not None and settings.inference_url:
        InferenceReplicas(settings.inference_url).one()  # raises with several
    if hyper.lora and settings.weight_broadcast is not None:
        raise InvalidInput(
            "a LoRA job publishes its adapter (megabytes) through the checkpoint "
            "directory; unset COBALT_TRAINER_WEIGHT_BROADCAST for it"
        )


def published_weights(policy_dir: Path) -> WeightsIdentity | None:
    """What a step's report names as the checkpoint it published (directory, digest, job
    and step), so the job's page can list it and the runs evaluated with it; None (and a
    warning) when it cannot be read back, which costs the report nothing else."""
    try:
        return describe_weights(policy_dir)
    except OSError as exc:
        logger.warning("cannot describe the checkpoint %s for the step report: %s", policy_dir, exc)
        return None
