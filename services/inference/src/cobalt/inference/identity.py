"""What `GET /v1/policy` reports as the serving weights (`PolicyStatus.weights`): the
directory, its digest and the training job and step that wrote it, read once per load
(`cobalt.shared.weight_identity`), so a run can record which weights produced it."""

from __future__ import annotations

import logging
from pathlib import Path

from cobalt.shared.contracts.weights import WeightsIdentity
from cobalt.shared.weight_identity import describe_weights, weights_kind

__all__ = ["identify"]

logger = logging.getLogger("cobalt.inference")


def identify(
    directory: Path | None, version: int, *, job: int | None = None, step: int | None = None
) -> WeightsIdentity:
    """The identity of the weights `directory` holds, served as `version`; None: they came
    over a broadcast (no directory to describe), named by the training `job` and `step`
    the trainer said they are. A directory that cannot be read (the server started on a
    model it has since lost) is named without a digest."""
    if directory is None:
        return WeightsIdentity(kind="broadcast", job=job, step=step, version=version)
    try:
        described = describe_weights(directory)
    except OSError as exc:
        logger.warning("cannot describe the weights in %s: %s", directory, exc)
        kind = weights_kind(directory) if Path(directory).is_dir() else "full"
        return WeightsIdentity(kind=kind, path=str(directory), version=version)
    return described.model_copy(update={"version": version})
