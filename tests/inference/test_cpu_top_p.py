"""Top-p on the CPU from the most probable tokens (cobalt.inference.cpu_top_p): the same
tokens kept as vLLM's sort, and the plugin loaded where vLLM samples."""

from __future__ import annotations

import pytest

from tests.support.inference import SERVED_NAME, Server, run_model_tool

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("seed", [0, 1])
def test_top_p_from_candidates_keeps_what_vllms_sort_keeps(seed: int) -> None:
    """Random LM-like and flat rows, several temperatures, p and candidate counts, a top-k:
    every row's kept tokens are those of vLLM's own function, but where a token's mass
    above it is within 1e-5 of p (two summation orders); both paths run (the candidates,
    and vLLM's sort for rows they do not cover)."""
    result = run_model_tool("top-p", str(seed))
    assert result["unexplained"] == 0, result
    assert 0 < result["fallback_rows"] < result["rows"], result


def test_the_server_samples_top_p_through_the_plugin(tiny_server: Server) -> None:
    """vLLM loads the plugin (its `vllm.general_plugins` entry point) in the engine process,
    and a top-p request's decode steps go through it."""
    tiny_server.openai().completions.create(
        model=SERVED_NAME, prompt=[5, 6, 7], max_tokens=3, temperature=0.8, top_p=0.9
    )
    log = tiny_server.log.read_text(errors="replace")
    assert "cobalt: top-p on the CPU from the 256 most probable tokens" in log
    assert "cobalt: first top-p step of" in log
