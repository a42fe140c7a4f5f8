"""The delta encoding over the broadcast path's CPU twin (gloo), between two processes: the
trainer's side sends a delta's manifest and payload (the bytes a delta directory holds),
the receiving process applies them to the version before and gets byte-identical weights;
a gap or a checksum mismatch is refused there and leaves its weights as they were."""

from __future__ import annotations

import hashlib
import multiprocessing
from typing import Any

import torch

from cobalt.shared.ports import free_port
from cobalt.shared.weight_broadcast import open_weight_group
from cobalt.shared.weight_delta import DeltaError, broadcast_delta, encode_delta, receive_delta

SCENARIOS = ("intact", "gap", "corrupted")
BASE_VERSION = 4


def weights(step: int) -> dict[str, torch.Tensor]:
    """Served (bfloat16) weights after `step` steps: each step changes a few values."""
    generator = torch.Generator().manual_seed(0)
    tensors = {
        "embed": torch.randn(64, 16, generator=generator),
        "layer.weight": torch.randn(16, 16, generator=generator),
        "norm": torch.ones(16),
    }
    for _ in range(step):
        for tensor in tensors.values():
            mask = torch.rand(tensor.shape, generator=generator) < 0.05
            tensor += mask * 1e-2
    return {name: tensor.to(torch.bfloat16) for name, tensor in tensors.items()}


def digests(tensors: dict[str, torch.Tensor]) -> dict[str, str]:
    return {
        n: hashlib.sha256(t.view(torch.uint8).numpy().tobytes()).hexdigest()
        for n, t in tensors.items()
    }  # noqa: E501


def gloo_group(port: int, rank: int) -> Any:
    """One end of a two-process weight group over gloo on this machine."""
    return open_weight_group(
        host="127.0.0.1",
        port=port,
        rank=rank,
        world_size=2,
        backend="gloo",
        device="cpu",
        timeout_s=120,
    )


def receiver(ports: list[int], results: Any) -> None:
    """Rank 1, one group per scenario: the weights of version 4 (3 in the gap scenario)."""
    for scenario, port in zip(SCENARIOS, ports, strict=True):
        group = gloo_group(port, rank=1)
        tensors = weights(1)
        before = digests(tensors)
        base = BASE_VERSION - 1 if scenario == "gap" else BASE_VERSION
        try:
            version = receive_delta(group, tensors, base_version=base).version
            results.put((scenario, version, digests(tensors), before))
        except DeltaError as exc:
            results.put((scenario, str(exc), digests(tensors), before))


def test_a_broadcast_delta_rebuilds_the_weights_and_a_gap_or_corruption_is_refused() -> None:
    previous, current = weights(1), weights(2)
    manifest, payload = encode_delta(
        previous=previous,
        current=current,
        version=BASE_VERSION + 1,
        base_version=BASE_VERSION,
        full_version=BASE_VERSION,
    )
    assert 0 < manifest.changed < manifest.values  # a real delta: some values, not all
    ports = [free_port() for _ in SCENARIOS]
    spawn = multiprocessing.get_context("spawn")
    results = spawn.Queue()
    child = spawn.Process(target=receiver, args=(ports, results))
    child.start()
    try:
        for scenario, port in zip(SCENARIOS, ports, strict=True):
            group = gloo_group(port, rank=0)
            sent = payload
            if scenario == "corrupted":  # a flipped byte on the way
                sent = bytes([payload[0] ^ 0xFF]) + payload[1:]
            assert broadcast_delta(group, manifest, sent) > len(payload)
        outcomes = {scenario: results.get(timeout=120)[1:] for scenario in SCENARIOS}
    finally:
        child.join(60)
        if child.is_alive():
            child.kill()
    version, received, _before = outcomes["intact"]
    assert version == BASE_VERSION + 1
    assert received == digests(current)  # byte-identical to the trainer's weights
    for scenario, refusal in (("gap", "gap: the delta of version 5"), ("corrupted", "checksum")):
        message, after, before = outcomes[scenario]
        assert refusal in message, message
        assert after == before  # refused: the weights as they were
