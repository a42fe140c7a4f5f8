"""Which weights a server serves: the digest of a weights directory and what
`GET /v1/policy` reports about the serving weights (`weights`), against the stand-in
engine of test_control.py: read once per load, from the directory it loaded."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cobalt.shared import weight_identity
from cobalt.shared.checkpoints import write_policy_version
from cobalt.shared.clients.inference import served_weights
from cobalt.shared.weight_identity import describe_weights, weights_digest
from tests.support.checkpoints import checkpoint
from tests.support.control import StandInEngine, broadcast_request, client, load, make, run
from tests.support.scripted_server import Reply, scripted_server


def test_the_digest_is_of_the_weights_not_of_where_they_are_or_their_version_number(
    tmp_path: Path,
) -> None:
    first = checkpoint(tmp_path, "a")
    write_policy_version(first, 3, step=3, job=7)
    copy = tmp_path / "copy"
    shutil.copytree(first, copy)
    write_policy_version(copy, 0)  # published again under another number: same weights
    assert weights_digest(first) == weights_digest(copy)
    weights = copy / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    assert weights_digest(first) != weights_digest(copy)
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="holds no files"):
        weights_digest(tmp_path / "empty")


def test_a_large_file_is_read_at_both_ends_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(weight_identity, "WHOLE_FILE_BYTES", 64)
    monkeypatch.setattr(weight_identity, "SAMPLE_BYTES", 16)
    directory = tmp_path / "big"
    directory.mkdir()
    blob = directory / "model.safetensors"
    blob.write_bytes(bytes(100))
    before = weights_digest(directory)
    blob.write_bytes(bytes(50) + b"\1" + bytes(49))  # the middle: not read
    assert weights_digest(directory) == before
    blob.write_bytes(b"\1" + bytes(99))  # the head (the safetensors header lives there)
    assert weights_digest(directory) != before
    blob.write_bytes(bytes(99) + b"\1")
    assert weights_digest(directory) != before


def test_a_checkpoint_names_its_job_and_step(tmp_path: Path) -> None:
    directory = checkpoint(tmp_path, "step-4")
    write_policy_version(directory, 4, step=4, job=12)
    described = describe_weights(directory)
    assert (described.kind, described.job, described.step, described.version) == (
        "full",
        12,
        4,
        4,
    )
    assert described.path == str(directory.resolve())
    assert described.digest == weights_digest(directory)


def test_the_server_reports_which_weights_it_serves_and_each_load_changes_it(
    tmp_path: Path,
) -> None:
    """Started on a base model: no job. After loading a job's step: that job and step
    and the digest of that directory, whatever version number it is served as."""
    base = checkpoint(tmp_path, "model")
    step = checkpoint(tmp_path, "step-2", tensors={"lm_head.weight": ("F32", [10, 5])})
    write_policy_version(step, 2, step=2, job=9)
    engine = StandInEngine()
    app, _, _ = make(tmp_path, engine)

    async def scenario() -> None:
        async with client(app) as http:
            started = (await http.get("/v1/policy")).json()["weights"]
            assert started["kind"] == "full" and started["job"] is None
            assert started["path"] == str(base.resolve())
            assert started["digest"] == weights_digest(base)
            assert (await load(http, str(step), version=5)).status_code == 200
            loaded = (await http.get("/v1/policy")).json()["weights"]
        assert (loaded["job"], loaded["step"], loaded["version"]) == (9, 2, 5)
        assert loaded["digest"] == weights_digest(step) != started["digest"]

    run(scenario())


def test_a_failed_load_leaves_the_reported_weights_as_they_were(tmp_path: Path) -> None:
    checkpoint(tmp_path, "model")
    step = checkpoint(tmp_path, "step-1")
    write_policy_version(step, 1, step=1, job=3)
    engine = StandInEngine({"loaded": False, "error": "shape", "restored": True})
    app, _, controller = make(tmp_path, engine)
    before = controller.weights

    async def scenario() -> None:
        async with client(app) as http:
            assert (await load(http, str(step))).status_code == 422
            assert (await http.get("/v1/policy")).json()["weights"]["job"] is None

    run(scenario())
    assert controller.weights == before


def test_a_broadcast_is_reported_as_the_job_step_the_trainer_said_it_is(tmp_path: Path) -> None:
    """A broadcast has no directory to describe: the server reports the (job, step) the
    trainer's request named, so a run sampled from it still records whose weights."""
    engine = StandInEngine()
    app, _, _ = make(tmp_path, engine, weight_broadcast="gloo", tensor_parallel_size=2)

    async def scenario() -> None:
        async with client(app) as http:
            sent = broadcast_request(job=6, step=3)
            assert (await http.post("/v1/policy/broadcast", json=sent)).status_code == 200
            weights = (await http.get("/v1/policy")).json()["weights"]
        assert (weights["kind"], weights["job"], weights["step"]) == ("broadcast", 6, 3)
        assert weights["version"] == 4 and weights["path"] is None

    run(scenario())


def test_an_endpoint_that_does_not_say_which_weights_it_serves_reports_none() -> None:
    """Another OpenAI-compatible server (no /v1/policy), an answer that is no policy
    status, a refused token: a run then records no policy rather than failing."""
    replies = [Reply(404, {"detail": "Not Found"}), Reply(200, {"data": []}), Reply(401, {})]
    with scripted_server(*replies) as server:
        for _ in replies:
            assert served_weights(f"{server.url}/v1", "key") is None
    assert server.requests == [("GET", "/v1/policy")] * 3
