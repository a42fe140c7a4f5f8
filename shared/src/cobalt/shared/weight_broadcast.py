"""Weights from the trainer into vLLM's workers over a process group of their own.

The faster path RL stacks take between separate trainer and inference GPUs (OpenRLHF's
and open-instruct's worker wrappers, TRL's `vllm serve` weight-sync extension, verl's
disaggregated mode): instead of writing a checkpoint that vLLM reads back, the trainer
(rank 0) and the vLLM workers (ranks 1..N) form a process group outside both programs'
own `torch.distributed` worlds, and rank 0 broadcasts every tensor; each worker feeds it
to vLLM's in-place reload as it lands. Both sides run this module, so the rendezvous
and the wire order are written once. torch is imported here lazily: the core environment
(the control middleware's validation) has none.

The group is a `TCPStore` served by rank 0 plus a backend built directly on it
(`ProcessGroupNCCL` on GPUs, `ProcessGroupGloo` as the CPU twin the tests use), never the
default process group: vLLM's workers and torchrun's trainer ranks each have one already.
One group per broadcast: the rendezvous costs well under a second beside the tensors, and
nothing is left half-open between steps when either side restarts.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from cobalt.shared.contracts.inference import TensorSpec, WeightBroadcastBackend

__all__ = ["WeightGroup", "open_weight_group"]

_PREFIX = "cobalt-weights"


@dataclass
class WeightGroup:
    """A joined broadcast group: rank 0 sends, every other rank receives, in one order."""

    rank: int
    world_size: int
    device: Any
    backend: Any
    store: Any
    """Kept alive with the group: rank 0's store serves the rendezvous of the others."""

    def send(self, tensors: Iterable[Any]) -> int:
        """Broadcast each tensor (rank 0) in the order announced; returns the bytes sent."""
        sent = 0
        for tensor in tensors:
            self._broadcast(tensor.to(self.device).contiguous())
            sent += tensor.numel() * tensor.element_size()
        return sent

    def receive(self, specs: Iterable[TensorSpec]) -> Iterator[tuple[str, Any]]:
        """The announced tensors as they land (ranks > 0), each as (name, tensor)."""
        import torch

        for spec in specs:
            tensor = torch.empty(spec.shape, dtype=getattr(torch, spec.dtype), device=self.device)
            self._broadcast(tensor)
            yield spec.name, tensor

    def send_bytes(self, *blobs: bytes) -> int:
        """Broadcast byte strings (rank 0): their lengths, then each as a uint8 tensor (a
        delta's manifest and payload: `cobalt.shared.weight_delta.broadcast_delta`)."""
        import torch

        self._broadcast(torch.tensor([len(blob) for blob in blobs], dtype=torch.int64))
        for blob in blobs:
            self._broadcast(torch.frombuffer(bytearray(blob), dtype=torch.uint8))
        return sum(len(blob) for blob in blobs)

    def receive_bytes(self, count: int) -> list[bytes]:
        """The `count` byte strings rank 0 sends with `send_bytes` (ranks > 0)."""
        import torch

        lengths = torch.empty(count, dtype=torch.int64)
        self._broadcast(lengths)
        received = []
        for length in lengths.tolist():
            blob = torch.empty(int(length), dtype=torch.uint8)
            self._broadcast(blob)
            received.append(blob.numpy().tobytes())
        return received

    def _broadcast(self, tensor: Any) -> None:
        import torch.distributed as dist

        options = dist.BroadcastOptions()
        options.rootRank = 0
        self.backend.broadcast([tensor], options).wait()


def open_weight_group(
    *,
    host: str,
    port: int,
    rank: int,
    world_size: int,
    backend: str,
    device: Any,
    timeout_s: float = 600.0,
) -> WeightGroup:
    """Join (rank 0: open) the group at `host:port`; blocks until all `world_size` ranks
    have joined or `timeout_s` passes.

    Raises:
        ValueError: an unknown backend or a rank outside the group.
    """
    import torch
    import torch.distributed as dist

    if backend not in set(WeightBroadcastBackend):
        known = " or ".join(WeightBroadcastBackend)
        raise ValueError(f"backend must be {known}, not {backend!r}")
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is outside a group of {world_size}")
    timeout = timedelta(seconds=timeout_s)
    store = dist.TCPStore(host, port, world_size, is_master=rank == 0, timeout=timeout)
    prefixed = dist.PrefixStore(_PREFIX, store)
    if backend == WeightBroadcastBackend.GLOO:
        group: Any = dist.ProcessGroupGloo(prefixed, rank, world_size, timeout)
    else:  # one communicator on this process's current GPU
        torch.cuda.set_device(device)
        group = dist.ProcessGroupNCCL(prefixed, rank, world_size)
    return WeightGroup(rank, world_size, torch.device(device), group, store)
