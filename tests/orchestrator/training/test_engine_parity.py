"""Evaluation runs and multi-turn training share one multi-turn engine: driven by the same
scripted model on the same problem, they send the model exactly the same messages at every
turn (the prompt and feedback at turn t have one implementation), and stop the same way.

The model is the deterministic OpenAI test server and the executor a real one; evaluation
records into an in-memory store, training scores its episodes as a training job would.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from cobalt.orchestrator.rollouts.loop import RolloutSpec, roll_out_problem
from cobalt.orchestrator.rollouts.prompts import PromptTemplate
from cobalt.orchestrator.rollouts.sampling import ChatSampler, SamplingParams
from cobalt.orchestrator.store.repo_turns import TurnRow
from cobalt.orchestrator.training.episodes import EpisodeSpec, roll_out_episodes
from cobalt.orchestrator.training.rollout import GroupContext, ScoredGroup
from cobalt.shared.clients import AsyncExecutorClient, ModelEndpoint
from cobalt.shared.contracts import ProblemRow, StdinTest
from cobalt.shared.reward import TokenizerCounter
from tests.fakes.openai_server import FakeOpenAI, serve_fake_openai
from tests.support.training import NO_CODE, RIGHT, WRONG

PROBLEM = ProblemRow(
    external_id="double",
    statement="Read n and print 2n.",
    public_tests=[StdinTest(stdin="2", expected_stdout="4"),
                  StdinTest(stdin="3", expected_stdout="6")],
    hidden_tests=[StdinTest(stdin="5", expected_stdout="10")],
)  # fmt: skip
HALF = "```python\nn = int(input())\nprint(4 if n == 2 else n)\n```"
"""Passes the first public test only: its feedback names the second."""


def scripted(messages: list[dict[str, Any]], index: int) -> str:
    """Turn 0: wrong, right, no code, half right. Later: no code -> wrong, wrong -> half,
    half -> right, so trajectories run for different numbers of turns."""
    if not any(m["role"] == "assistant" for m in messages):
        return [WRONG, RIGHT, NO_CODE, HALF][index % 4]
    previous = messages[-2]["content"]
    if "```" not in previous:
        return WRONG
    return HALF if "+ 1" in previous else RIGHT


class MemoryStore:
    def __init__(self) -> None:
        self.rows: list[TurnRow] = []

    def stored_turns(self, problem_id: int) -> dict[int, list[TurnRow]]:
        return {}

    def save(self, rows: Sequence[TurnRow]) -> None:
        self.rows.extend(rows)

    def cancelled(self) -> bool:
        return False


def sent_messages(fake: FakeOpenAI) -> list[list[str]]:
    """Per turn (the number of assistant messages in a request), every request's messages
    as canonical JSON, sorted: the concurrent requests of one turn arrive in any order."""
    turns: dict[int, list[str]] = {}
    for request in fake.requests:
        messages = request["messages"]
        turn = sum(m["role"] == "assistant" for m in messages)
        turns.setdefault(turn, []).extend([json.dumps(messages, sort_keys=True)] * request["n"])
    return [sorted(turns[t]) for t in sorted(turns)]


async def _with_clients(url: str, executor_url: str, body: Any) -> Any:
    sampler = ChatSampler(ModelEndpoint(base_url=url, model="fake-model"), max_retries=0)
    executor = AsyncExecutorClient(base_url=executor_url)
    try:
        return await body(sampler, executor)
    finally:
        await sampler.aclose()
        await executor.close()


@pytest.mark.parametrize("stop_on_pass", [True, False])
def test_evaluation_and_training_send_the_same_messages_every_turn(
    executor_url: str, policy_dir: Path, stop_on_pass: bool
) -> None:
    template = PromptTemplate.load("default")
    n, turns = 4, 4
    sampling = SamplingParams(n=n, max_tokens=200)

    evaluation, store = FakeOpenAI(responder=scripted), MemoryStore()
    with serve_fake_openai(evaluation) as url:
        spec = RolloutSpec(run_id=1, n=n, feedback_turns=turns - 1, sampling=sampling,
                           stop_on_pass=stop_on_pass)  # fmt: skip
        asyncio.run(
            _with_clients(
                url,
                executor_url,
                lambda sampler, executor: roll_out_problem(
                    spec, 9, PROBLEM, template, sampler, executor, store
                ),
            )
        )

    training = FakeOpenAI(responder=scripted)
    context = GroupContext(
        context_key="double/0",
        problem_id=9,
        messages=template.initial_messages(PROBLEM),
        prev_best=0.0,
        tests=[*PROBLEM.public_tests, *PROBLEM.hidden_tests],
        public_count=len(PROBLEM.public_tests),
    )
    with serve_fake_openai(training) as url:
        group: ScoredGroup = asyncio.run(
            _with_clients(
                url,
                executor_url,
                lambda sampler, executor: roll_out_episodes(
                    context,
                    sampler=sampler,
                    executor=executor,
                    tokens=TokenizerCounter.from_path(policy_dir),
                    params=sampling,
                    template=template,
                    spec=EpisodeSpec(max_turns=turns, stop_on_pass=stop_on_pass),
                ),
            )
        )

    sent = sent_messages(evaluation)
    assert sent == sent_messages(training)
    # The script makes trajectories stop at different turns (with stop-on-pass).
    per_turn = [len(requests) for requests in sent]
    assert per_turn == ([4, 3, 2, 1] if stop_on_pass else [4, 4, 4, 4])
    # Both callers took the same turns of the same trajectories, with the same answers.
    evaluated = sorted((r.sample_index, r.turn_index, r.raw_response) for r in store.rows)
    trained = sorted((s.sample_index, s.turn, s.response) for s in group.samples)
    assert evaluated == trained
    # And fed back the same: every later prompt ends with the feedback evaluation stored.
    feedback = {(r.sample_index, r.turn_index): r.feedback for r in store.rows}
    later_prompts = [json.loads(m) for turn in sent[1:] for m in turn]
    assert all(any(p[-1]["content"] == f for f in feedback.values()) for p in later_prompts)
