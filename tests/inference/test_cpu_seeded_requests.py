"""Seeded requests on the CPU (cobalt.inference.cpu_seeded_requests): prompts prefilled in
parts no longer bring the engine down, and a rewound generator draws as one never rewound."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.support.inference import SERVED_NAME, Server, run_model_tool

pytestmark = pytest.mark.slow

PROMPT_TOKENS = 900
"""Four such prompts of two choices each are ~7,200 tokens, several times one engine
step's budget (vLLM's 2,048 on the CPU): most are prefilled over several steps."""


@pytest.mark.parametrize("seed", [3, 4])
def test_a_rewound_generator_draws_as_one_never_rewound(seed: int) -> None:
    result = run_model_tool("rewind", str(seed))
    assert result["discards"] > 0, result
    assert result["kept_equal"] and result["second_rewind_undid_nothing"], result


def test_seeded_requests_prefilled_in_parts_are_answered(tiny_server: Server) -> None:
    """Before the plugin, the first such step ended the engine ("CPU Generator does not use
    offset") and every request failed. Now each is answered; the server stays up; and a
    seeded request alone answers alike twice."""
    client = tiny_server.openai()

    def seeded(index: int) -> list[str]:
        prompt = [(7 * index + position) % 500 + 5 for position in range(PROMPT_TOKENS)]
        done = client.completions.create(
            model=SERVED_NAME, prompt=prompt, max_tokens=4, temperature=1.0, n=2,
            seed=100 + index,
        )  # fmt: skip
        return [choice.text for choice in done.choices]

    with ThreadPoolExecutor(max_workers=4) as pool:
        answers = list(pool.map(seeded, range(4)))
    assert all(len(texts) == 2 for texts in answers)
    assert "does not use offset" not in tiny_server.log.read_text(errors="replace")
    assert "seeded requests' generators rewind on the CPU" in tiny_server.log.read_text(
        errors="replace"
    )
    assert seeded(9) == seeded(9)
