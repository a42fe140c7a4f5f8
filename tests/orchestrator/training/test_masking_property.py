"""No reward is ever computed from a sandbox error, in any training mode (property test).

Every scorer (Cobalt and single-turn, multi-turn, VeRPO) runs against an executor double
whose every program run answers a verdict list drawn by hypothesis, `sandbox_error` among
them (the HTTP boundary's real path is in test_masking.py). Whatever the draws: no ledger
row carries a `sandbox_error`, every response is either scored or masked, and without a
`sandbox_error` nothing is masked.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer, models, pre_tokenizers

from cobalt.orchestrator.rollouts.prompts import PromptTemplate
from cobalt.orchestrator.rollouts.sampling import ChatSampler, SamplingParams
from cobalt.orchestrator.training.rollout import GroupContext, ScoredGroup
from cobalt.orchestrator.training.scorers import GroupRollout, score_group
from cobalt.shared.clients import ModelEndpoint
from cobalt.shared.contracts import (
    BatchExecuteRequest,
    BatchExecuteResponse,
    ExecuteResponse,
    StdinTest,
    TestResult,
    Verdict,
)
from cobalt.shared.contracts.training_params import (
    CobaltParams,
    MultiTurnParams,
    SingleTurnParams,
    TrainingParams,
    VerpoParams,
)
from cobalt.shared.reward import TokenizerCounter, pass_vector
from tests.fakes.openai_server import FakeOpenAI, serve_fake_openai
from tests.support.training import answer

VERDICTS = [Verdict.ACCEPTED, Verdict.WRONG_ANSWER, Verdict.SANDBOX_ERROR, Verdict.TIME_LIMIT]
TESTS = [
    StdinTest(stdin="2", expected_stdout="4"),
    StdinTest(stdin="3", expected_stdout="6"),
    StdinTest(stdin="5", expected_stdout="10"),
]
N = 3


class DrawnExecutor:
    """Answers each program run with verdicts drawn by hypothesis."""

    def __init__(self, data: st.DataObject, verdicts: list[Verdict]) -> None:
        self.data, self.verdicts, self.drawn = data, verdicts, 0

    async def execute_batch(self, batch: BatchExecuteRequest) -> BatchExecuteResponse:
        answers = []
        for request in batch.requests:
            drawn = self.data.draw(
                st.lists(
                    st.sampled_from(self.verdicts),
                    min_size=len(request.tests),
                    max_size=len(request.tests),
                )
            )
            self.drawn += drawn.count(Verdict.SANDBOX_ERROR)
            passed = drawn.count(Verdict.ACCEPTED)
            answers.append(
                ExecuteResponse(
                    results=[TestResult(verdict=v) for v in drawn],
                    passed=passed,
                    total=len(drawn),
                    pass_rate=passed / len(drawn),
                    executor_version="drawn",
                )
            )
        return BatchExecuteResponse(results=answers)


@pytest.fixture(scope="module")
def model_url() -> Iterator[str]:
    with serve_fake_openai(FakeOpenAI(responder=answer)) as url:
        yield url


@pytest.fixture(scope="module")
def tokens(tmp_path_factory: pytest.TempPathFactory) -> TokenizerCounter:
    tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    path: Path = tmp_path_factory.mktemp("policy") / "tokenizer.json"
    tokenizer.save(str(path))
    return TokenizerCounter.from_path(path.parent)


def roll_out(url: str, tokens: TokenizerCounter, executor: Any, params: TrainingParams) -> Any:
    context = GroupContext(
        context_key="bandit:1",
        problem_id=1,
        messages=[{"role": "user", "content": "Read n, print 2n."}],
        prev_best=0.25,
        tests=TESTS,
        public_count=2,
    )

    async def run() -> ScoredGroup:
        sampler = ChatSampler(ModelEndpoint(base_url=url, model="fake-model"), max_retries=0)
        try:
            rollout = GroupRollout(
                context=context,
                sampler=sampler,
                executor=executor,
                tokens=tokens,
                sampling=SamplingParams(n=N, max_tokens=200),
                template=PromptTemplate.load("default"),
            )
            return await score_group(rollout, params)
        finally:
            await sampler.aclose()

    return asyncio.run(run())


MODES = [
    CobaltParams(judge_retries=1),
    SingleTurnParams(judge_retries=0),
    MultiTurnParams(judge_retries=1, turns=2),
    VerpoParams(judge_retries=1, turns=2),
]


@pytest.mark.parametrize("params", MODES, ids=lambda p: str(p.mode))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), with_errors=st.booleans())
def test_no_reward_is_ever_computed_from_a_sandbox_error(
    model_url: str,
    tokens: TokenizerCounter,
    params: TrainingParams,
    data: st.DataObject,
    with_errors: bool,
) -> None:
    verdicts = VERDICTS if with_errors else [v for v in VERDICTS if v != Verdict.SANDBOX_ERROR]
    executor = DrawnExecutor(data, verdicts)
    group = roll_out(model_url, tokens, executor, params)
    assert all(Verdict.SANDBOX_ERROR not in row.verdicts for row in group.samples)
    scored = {row.sample_index for row in group.samples}
    assert len(scored) + group.masked == N  # every response scored or masked, never both
    if executor.drawn == 0:
        assert group.masked == 0


@given(st.lists(st.sampled_from(VERDICTS), min_size=1, max_size=6))
def test_verpo_pass_vectors_refuse_a_sandbox_error(verdicts: list[Verdict]) -> None:
    if Verdict.SANDBOX_ERROR in verdicts:
        with pytest.raises(ValueError, match="sandbox_error"):
            pass_vector([str(v) for v in verdicts], len(verdicts))
    else:
        assert sum(pass_vector([str(v) for v in verdicts], 6)) == verdicts.count(Verdict.ACCEPTED)
