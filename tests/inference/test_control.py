"""The weight-load state machine of the control middleware, against a stand-in engine.

The real vLLM path is covered in test_weights.py; here a stand-in engine makes the rare
outcomes happen on demand (a restore that fails, an engine that never answers, a
request that never finishes) to show none of them hangs or serves mixed weights.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from cobalt.inference.control import PolicyControlMiddleware
from cobalt.inference.settings import InferenceSettings
from cobalt.shared.contracts.inference import POLICY_VERSION_HEADER
from tests.support.control import (
    LOADED,
    StandInEngine,
    broadcast_request,
    client,
    load,
    make,
    run,
)


def test_a_load_bumps_the_version_stamped_on_responses(tmp_path: Path) -> None:
    engine = StandInEngine()
    app, _, controller = make(tmp_path, engine)

    async def scenario() -> None:
        async with client(app) as http:
            first = await http.post("/v1/completions", json={})
            assert first.headers[POLICY_VERSION_HEADER] == "0"
            loaded = await load(http, str(tmp_path / "ckpt"))
            assert loaded.status_code == 200, loaded.text
            assert loaded.json()["version"] == 1
            second = await http.post("/v1/completions", json={})
            assert second.headers[POLICY_VERSION_HEADER] == "1"
            status = (await http.get("/v1/policy")).json()
        assert status["version"] == 1 and status["loads"] == 1
        assert status["weights_path"] == str((tmp_path / "ckpt").resolve())

    run(scenario())
    assert engine.calls == [
        {
            "weights_path": str((tmp_path / "ckpt").resolve()),
            "fallback_path": str((tmp_path / "model").resolve()),
        }
    ]
    assert engine.cache_resets == 1
    assert REGISTRY.get_sample_value("cobalt_policy_version") == controller.version == 1


def test_a_load_waits_for_requests_in_flight_and_holds_new_ones(tmp_path: Path) -> None:
    engine = StandInEngine()
    app, inner, _ = make(tmp_path, engine)

    async def scenario() -> None:
        async with client(app) as http:
            inner.release.clear()
            running = asyncio.create_task(http.post("/v1/chat/completions", json={}))
            while inner.entered < 1:
                await asyncio.sleep(0.01)
            loading = asyncio.create_task(load(http, "/ckpt"))
            await asyncio.sleep(0.1)
            assert engine.calls == []  # still draining
            arriving = asyncio.create_task(http.post("/v1/chat/completions", json={}))
            await asyncio.sleep(0.1)
            assert inner.entered == 1  # held at the gate
            inner.release.set()
            old, loaded, new = await asyncio.gather(running, loading, arriving)
        assert old.headers[POLICY_VERSION_HEADER] == "0"
        assert loaded.status_code == 200 and loaded.json()["drain_s"] >= 0.1
        assert new.headers[POLICY_VERSION_HEADER] == "1"

    run(scenario())


def test_drain_timeout_loads_nothing_and_reopens(tmp_path: Path) -> None:
    engine = StandInEngine()
    app, inner, controller = make(tmp_path, engine, drain_timeout_s=0.2)

    async def scenario() -> None:
        async with client(app) as http:
            inner.release.clear()
            stuck = asyncio.create_task(http.post("/v1/completions", json={}))
            while inner.entered < 1:
                await asyncio.sleep(0.01)
            refused = await load(http, "/ckpt")
            assert refused.status_code == 503
            assert "still running" in refused.json()["error"]["message"]
            assert controller.gate.is_open
            inner.release.set()
            await stuck
            after = await http.post("/v1/completions", json={})
            assert after.headers[POLICY_VERSION_HEADER] == "0"

    run(scenario())
    assert engine.calls == []


def test_a_failure_inside_vllm_reports_its_error_and_keeps_serving(tmp_path: Path) -> None:
    engine = StandInEngine({"loaded": False, "error": "AssertionError at x.py:1", "restored": True})
    app, _, controller = make(tmp_path, engine)

    async def scenario() -> None:
        async with client(app) as http:
            failed = await load(http, "/ckpt")
            assert failed.status_code == 422
            message = failed.json()["error"]["message"]
            assert "AssertionError at x.py:1" in message and "previous weights restored" in message
            assert (await http.get("/ready")).status_code == 200
            assert (await http.post("/v1/completions", json={})).status_code == 200

    run(scenario())
    assert controller.state == "serving" and controller.version == 0
    assert controller.failed_loads == 1


def test_a_failed_restore_marks_the_server_broken(tmp_path: Path) -> None:
    engine = StandInEngine({"loaded": False, "error": "disk gone", "restored": False})
    app, _, controller = make(tmp_path, engine)

    async def scenario() -> None:
        async with client(app) as http:
            assert (await load(http, "/ckpt")).status_code == 500
            generation = await http.post("/v1/completions", json={})
            assert generation.status_code == 503
            assert "inconsistent" in generation.json()["error"]["message"]
            assert (await http.get("/ready")).status_code == 503
            again = await load(http, "/ckpt2")
            assert again.status_code == 503

    run(scenario())
    assert controller.state == "broken"


def test_an_engine_error_marks_the_server_broken(tmp_path: Path) -> None:
    app, _, controller = make(tmp_path, StandInEngine(RuntimeError("engine core died")))

    async def scenario() -> None:
        async with client(app) as http:
            failed = await load(http, "/ckpt")
            assert failed.status_code == 500
            assert "engine core died" in failed.json()["error"]["message"]

    run(scenario())
    assert controller.state == "broken"


def test_an_engine_that_does_not_answer_times_out_and_old_weights_return(tmp_path: Path) -> None:
    answer = asyncio.Event()

    async def slow() -> dict[str, Any]:
        await answer.wait()
        return LOADED  # the late load succeeded: it must be undone

    engine = StandInEngine(slow, LOADED)
    app, _, controller = make(tmp_path, engine, load_timeout_s=0.2)

    async def scenario() -> None:
        async with client(app) as http:
            timed_out = await load(http, "/ckpt")
            assert timed_out.status_code == 504
            assert "within 0.2 s" in timed_out.json()["error"]["message"]
            assert (await http.get("/ready")).status_code == 503
            held = asyncio.create_task(http.post("/v1/completions", json={}))
            await asyncio.sleep(0.1)
            assert not held.done()
            answer.set()
            response = await asyncio.wait_for(held, 5)
            assert response.headers[POLICY_VERSION_HEADER] == "0"
            assert (await http.get("/ready")).status_code == 200

    run(scenario())
    serving = str((tmp_path / "model").resolve())
    assert engine.calls[1] == {"weights_path": serving, "fallback_path": serving}
    assert controller.state == "serving" and controller.version == 0


@pytest.mark.parametrize(
    ("method", "path", "body", "headers", "status"),
    [
        ("GET", "/v1/policy", None, {"Authorization": "Bearer nope"}, 401),
        ("POST", "/v1/policy/weights", b"{", {}, 422),
        ("POST", "/v1/policy/weights", b'{"path": ""}', {}, 422),
        ("POST", "/v1/policy/weights", b'{"path": "/x", "version": -1}', {}, 422),
        ("POST", "/v1/policy/weights", b'{"path": "/x", "bogus": 1}', {}, 422),
        ("GET", "/v1/policy/weights", None, {}, 405),
        ("POST", "/v1/policy/weights", b"x" * 70_000, {}, 413),
    ],
)
def test_bad_control_requests(
    tmp_path: Path, method: str, path: str, body: bytes | None, headers: dict[str, str], status: int
) -> None:
    app, _, controller = make(tmp_path, StandInEngine())

    async def scenario() -> None:
        async with client(app) as http:
            response = await http.request(method, path, content=body, headers=headers)
            assert response.status_code == status, response.text
            error = json.loads(response.text)["error"]
            assert error["code"] == status and error["message"]

    run(scenario())
    assert controller.version == 0


def test_stale_versions_and_concurrent_loads_conflict(tmp_path: Path) -> None:
    answer = asyncio.Event()

    async def slow() -> dict[str, Any]:
        await answer.wait()
        return LOADED

    app, _, _ = make(tmp_path, StandInEngine(LOADED, slow))

    async def scenario() -> None:
        async with client(app) as http:
            assert (await load(http, "/a", version=3)).json()["version"] == 3
            stale = await load(http, "/b", version=3)
            assert stale.status_code == 409 and "not newer" in stale.text
            first = asyncio.create_task(load(http, "/c"))
            await asyncio.sleep(0.05)
            second = await load(http, "/d")
            assert second.status_code == 409
            answer.set()
            assert (await first).json()["version"] == 4

    run(scenario())


def test_a_broadcast_is_refused_with_the_setting_to_change_when_it_is_off(tmp_path: Path) -> None:
    engine = StandInEngine()
    app, _, controller = make(tmp_path, engine)

    async def scenario() -> None:
        async with client(app) as http:
            refused = await http.post("/v1/policy/broadcast", json=broadcast_request())
            assert refused.status_code == 409, refused.text
            assert "COBALT_INFERENCE_WEIGHT_BROADCAST=nccl" in refused.json()["error"]["message"]
            status = (await http.get("/v1/policy")).json()
            assert status["weight_broadcast"] is None and status["workers"] == 1

    run(scenario())
    assert engine.calls == [] and controller.version == 0


def test_a_broadcast_runs_the_receive_on_every_worker_and_bumps_the_version(
    tmp_path: Path,
) -> None:
    engine = StandInEngine()
    app, _, controller = make(tmp_path, engine, weight_broadcast="gloo", tensor_parallel_size=2)

    async def scenario() -> None:
        async with client(app) as http:
            status = (await http.get("/v1/policy")).json()
            assert (status["weight_broadcast"], status["workers"]) == ("gloo", 2)
            done = await http.post("/v1/policy/broadcast", json=broadcast_request())
            assert done.status_code == 200, done.text
            assert done.json()["version"] == 4
            after = await http.post("/v1/completions", json={})
            assert after.headers[POLICY_VERSION_HEADER] == "4"

    run(scenario())
    assert engine.methods == ["cobalt_receive_weights"] and engine.cache_resets == 1
    assert engine.calls[0]["request"]["tensors"][1]["name"] == "lm_head.weight"
    assert controller.serving_dir == (tmp_path / "model").resolve()  # still the fallback


@pytest.mark.parametrize(
    ("changes", "status", "words"),
    [
        ({"backend": "nccl"}, 422, "COBALT_TRAINER_WEIGHT_BROADCAST=gloo"),
        ({"world_size": 2}, 422, "world_size must be 3"),
        ({"version": 0}, 409, "not newer"),
        ({"version": -1}, 422, "version"),
        ({"master_port": 0}, 422, "master_port"),
        ({"tensors": []}, 422, "tensors"),
        ({"tensors": [{"name": "w", "dtype": "int8", "shape": [2]}]}, 422, "dtype"),
        ({"tensors": [{"name": "w", "dtype": "float32", "shape": [-2]}]}, 422, "negative"),
        ({"tensors": [{"name": "w", "dtype": "float32", "shape": [2]}] * 2}, 422, "repeated"),
        ({"token": "x"}, 422, "token"),
    ],
)
def test_bad_broadcasts_are_refused_before_any_worker_is_asked(
    tmp_path: Path, changes: dict[str, Any], status: int, words: str
) -> None:
    engine = StandInEngine()
    app, _, controller = make(tmp_path, engine, weight_broadcast="gloo", tensor_parallel_size=2)

    async def scenario() -> None:
        async with client(app) as http:
            response = await http.post("/v1/policy/broadcast", json=broadcast_request(**changes))
            assert response.status_code == status, response.text
            assert words in response.json()["error"]["message"]

    run(scenario())
    assert engine.calls == [] and controller.state == "serving"


@pytest.mark.parametrize(
    ("restored", "state", "status"), [(True, "serving", 422), (False, "broken", 500)]
)
def test_a_failed_broadcast_keeps_serving_only_if_no_tensor_landed(
    tmp_path: Path, restored: bool, state: str, status: int
) -> None:
    outcome = {
        "loaded": False,
        "error": "RuntimeError: Connection closed by peer",
        "restored": restored,
    }
    engine = StandInEngine(outcome)
    app, _, controller = make(tmp_path, engine, weight_broadcast="gloo", tensor_parallel_size=2)

    async def scenario() -> None:
        async with client(app) as http:
            failed = await http.post("/v1/policy/broadcast", json=broadcast_request())
            assert failed.status_code == status, failed.text
            assert "Connection closed by peer" in failed.json()["error"]["message"]

    run(scenario())
    assert controller.state == state and controller.version == 0


def test_an_adapter_is_refused_with_the_setting_to_change_when_lora_is_off(
    tmp_path: Path,
) -> None:
    engine = StandInEngine()
    app, _, controller = make(tmp_path, engine)

    async def scenario() -> None:
        async with client(app) as http:
            refused = await http.post("/v1/policy/adapter", json={"path": str(tmp_path)})
            assert refused.status_code == 409, refused.text
            assert "COBALT_INFERENCE_LORA_MAX_RANK" in refused.json()["error"]["message"]
            status = (await http.get("/v1/policy")).json()
            assert status["adapter"] is None and status["lora_max_rank"] is None

    run(scenario())
    assert engine.calls == [] and controller.version == 0


def write_adapter(directory: Path, rank: int, *, weights: bool = True) -> Path:
    directory.mkdir(parents=True)
    config = {"peft_type": "LORA", "r": rank, "target_modules": ["q_proj"]}
    (directory / "adapter_config.json").write_text(json.dumps(config))
    if weights:
        (directory / "adapter_model.safetensors").write_bytes(b"\0" * 16)
    return directory


@pytest.mark.parametrize(
    ("make_dir", "reason"),
    [
        (lambda d: write_adapter(d, 16), "over this server's COBALT_INFERENCE_LORA_MAX_RANK=8"),
        (lambda d: write_adapter(d, 8, weights=False), "no adapter weights"),
        (lambda d: d, "not a directory"),
        (lambda d: d.mkdir() or d, "no adapter_config.json"),
    ],
)
def test_an_adapter_vllm_cannot_take_is_refused_before_it_is_asked(
    tmp_path: Path, make_dir: Callable[[Path], Path], reason: str
) -> None:
    engine = StandInEngine()
    app, _, controller = make(tmp_path, engine, lora_max_rank=8)
    controller.models = object()  # vLLM's registry: never reached
    path = make_dir(tmp_path / "adapter")

    async def scenario() -> None:
        async with client(app) as http:
            refused = await http.post("/v1/policy/adapter", json={"path": str(path)})
            assert refused.status_code == 422, refused.text
            assert reason in refused.json()["error"]["message"]

    run(scenario())
    assert controller.version == 0 and controller.adapters.current is None


def test_requests_for_the_served_name_go_to_the_serving_adapter(tmp_path: Path) -> None:
    from cobalt.inference.adapters import Adapter

    bodies: list[bytes] = []

    async def echo(scope: Any, receive: Any, send: Any) -> None:
        message = await receive()
        bodies.append(message["body"])
        lengths = [v for k, v in scope["headers"] if k == b"content-length"]
        assert lengths == [str(len(message["body"])).encode()]
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    settings = InferenceSettings(model=tmp_path / "model", served_name="m", lora_max_rank=8)
    app = PolicyControlMiddleware(echo, settings)
    app.controller.engine = StandInEngine()

    async def scenario() -> None:
        async with client(app) as http:
            await http.post("/v1/completions", json={"model": "m", "prompt": "a"})
            app.controller.adapters.current = Adapter(name="m-v3", lora_id=1, path="/a")
            app.controller.version = 3
            routed = await http.post("/v1/completions", json={"model": "m", "prompt": "a"})
            assert routed.headers[POLICY_VERSION_HEADER] == "3"
            await http.post("/v1/completions", json={"model": "other", "prompt": "m"})

    run(scenario())
    assert [json.loads(body)["model"] for body in bodies] == ["m", "m-v3", "other"]


def test_a_lora_rank_vllm_does_not_take_is_refused_with_the_sizes_it_does() -> None:
    with pytest.raises(ValueError, match="vLLM takes one of 1, 8, 16"):
        InferenceSettings(lora_max_rank=12)


def write_full(directory: Path, version: int | None) -> Path:
    """A checkpoint directory the pre-checks accept: config.json and one safetensors file."""
    directory.mkdir(parents=True)
    (directory / "config.json").write_text(json.dumps({"model_type": "llama", "vocab_size": 4}))
    header = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
    (directory / "model.safetensors").write_bytes(
        len(header).to_bytes(8, "little") + header + bytes(8)
    )
    if version is not None:
        (directory / "cobalt-policy.json").write_text(json.dumps({"version": version}))
    return directory


def write_delta_dir(directory: Path, version: int, base: int, full: int) -> Path:
    """A delta directory's files as the trainer writes them (the workers read the payload)."""
    directory.mkdir(parents=True)
    manifest = {"format": "xor-zlib/1", "version": version, "base_version": base,
                "full_version": full, "payload_sha256": "", "tensors": []}  # fmt: skip
    (directory / "cobalt-delta.json").write_text(json.dumps(manifest))
    (directory / "cobalt-policy.json").write_text(json.dumps({"version": version}))
    return directory
