"""Several processes, one policy: torchrun + FSDP (fully_shard) for GPUs, gloo on the CPU.

`torchrun --nproc-per-node G -m cobalt.trainer serve --job ID` starts G trainer processes.
Each holds a shard of the policy's (and the reference's) parameters (FSDP2
`fully_shard`, one unit per decoder layer plus the root) and takes a share of every
mini-batch's rows (row i goes to rank i mod G); FSDP averages the gradients over ranks.
Because the GRPO loss is a token-mean over the whole mini-batch, each rank scales its
local token-mean by (its tokens x G / all tokens), so the averaged gradient is exactly
the single-process one (`step.train_step` does this). Each rank packs its share into
micro-batches; the ranks agree on the largest count (`agree_on_counts`) and a rank with
fewer runs idle ones, since every backward joins FSDP's collectives. The backend is NCCL
on CUDA and gloo on the CPU, which is how the tests run this path here (no GPU).

Only rank 0 talks to the orchestrator and the inference service (`on_rank_zero`): it
claims each step and hands the batch to the other ranks, so G processes act as one
trainer towards the ledger; checkpoints are gathered to and written by rank 0
(checkpoint.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import torch
import torch.distributed as dist

__all__ = [
    "agree_on_counts",
    "all_reduce_token_weighted",
    "init_from_env",
    "on_rank_zero",
    "rank_and_size",
    "shard_model",
    "sum_over_ranks",
]

T = TypeVar("T")


def rank_and_size() -> tuple[int, int]:
    """(rank, world size); (0, 1) in a single process."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def init_from_env(device: torch.device) -> bool:
    """Join the process group torchrun describes (WORLD_SIZE > 1); False when alone."""
    if dist.is_initialized():
        return True
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return False
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(backend=backend)
    if device.type == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    return True


def shard_model(
    model: torch.nn.Module, compute_dtype: torch.dtype = torch.float32
) -> torch.nn.Module:
    """FSDP2 over `model`: one unit per decoder layer, then the rest (embeddings, head).

    A `compute_dtype` other than the parameters' own is FSDP2's mixed-precision policy:
    each unit is gathered in that dtype for forward and backward, while the sharded
    parameters (what AdamW updates) keep theirs and gradients are reduced in float32.
    """
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    stored = next(model.parameters()).dtype
    policy = MixedPrecisionPolicy(
        param_dtype=None if compute_dtype == stored else compute_dtype,
        reduce_dtype=torch.float32 if compute_dtype != stored else None,
    )
    layers: Any = getattr(getattr(model, "model", None), "layers", None)
    for layer in layers or []:
        fully_shard(layer, mp_policy=policy)
    fully_shard(model, mp_policy=policy)
    return model


def _collective_device() -> torch.device:
    """Where small collective tensors live: NCCL only moves CUDA tensors."""
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def agree_on_counts(counts: list[int]) -> list[int]:
    """The largest of each count over the ranks (the micro-batches every rank must run)."""
    _, size = rank_and_size()
    if size == 1:
        return counts
    values = torch.tensor(counts, dtype=torch.int64, device=_collective_device())
    dist.all_reduce(values, op=dist.ReduceOp.MAX)
    return [int(value) for value in values.tolist()]


def sum_over_ranks(
    values: Sequence[float], maxima: Sequence[float] = ()
) -> tuple[list[float], list[float]]:
    """Each of `values` summed over the ranks, each of `maxima` its largest (float64)."""
    _, size = rank_and_size()
    if size == 1:
        return list(values), list(maxima)
    device = _collective_device()
    sums = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(sums)
    largest = torch.tensor(list(maxima), dtype=torch.float64, device=device)
    if len(maxima):
        dist.all_reduce(largest, op=dist.ReduceOp.MAX)
    return [float(v) for v in sums.tolist()], [float(v) for v in largest.tolist()]


def all_reduce_token_weighted(
    metrics: dict[str, float], local_tokens: float, global_tokens: float
) -> dict[str, float]:
    """Per-token metrics of the whole mini-batch from each rank's own (exact for means)."""
    _, size = rank_and_size()
    if size == 1:
        return metrics
    names = sorted(metrics)
    values = torch.tensor(
        [metrics[name] * local_tokens for name in names],
        dtype=torch.float64,
        device=_collective_device(),
    )
    dist.all_reduce(values)
    return {name: float(value) / global_tokens for name, value in zip(names, values, strict=True)}


def on_rank_zero(work: Callable[[], T]) -> T:
    """Run `work` on rank 0 only and give its result to every rank (picklable).

    When it raises on rank 0, every rank raises that error, so a stopped job or an
    unreachable orchestrator ends all G processes alike instead of leaving G - 1 waiting
    in the next collective forever.
    """
    rank, size = rank_and_size()
    if size == 1:
        return work()
    outcome: list[Any] = [None]
    if rank == 0:
        try:
            outcome[0] = (True, work())
        except Exception as exc:  # handed on, and re-raised on rank 0 too
            outcome[0] = (False, exc)
    dist.broadcast_object_list(outcome, src=0)
    succeeded, value = outcome[0]
    if not succeeded:
        raise value
    return value  # type: ignore[no-any-return]
