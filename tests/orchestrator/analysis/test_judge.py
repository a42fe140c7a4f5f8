"""The judge's prompt, verdict parsing and bounded concurrency (no database, no HTTP)."""

from __future__ import annotations

import asyncio

from cobalt.orchestrator.analysis.judge import (
    UNPARSED,
    CaseForJudge,
    judge_cases,
    judge_messages,
    parse_category,
)
from cobalt.orchestrator.rollouts.sampling import Sample, SamplingParams
from cobalt.shared.errors import Unavailable, UpstreamError


def case(case_id: int, new_code: str = "print(7)") -> CaseForJudge:
    return CaseForJudge(
        case_id=case_id,
        statement="Print n.",
        feedback="Test 1 failed: expected 7",
        previous_code="print(input())",
        new_code=new_code,
        diff="-print(input())\n+print(7)\n",
        hidden_pass_before=0.5,
        hidden_pass_after=None,
    )


def sample(text: str) -> Sample:
    return Sample(text, "stop", None, None, None, 0, 0, 0.0, "judge", None)


class ScriptedSampler:
    """Answers `answers[new_code]` after a short wait, counting requests in flight."""

    def __init__(self, answers: dict[str, str], *, fail: Exception | None = None) -> None:
        self.answers = answers
        self.fail = fail
        self.in_flight = 0
        self.most_in_flight = 0
        self.calls: list[SamplingParams] = []

    async def sample(self, messages: list[dict[str, str]], params: SamplingParams) -> list[Sample]:
        self.calls.append(params)
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0.01)
            if self.fail is not None:
                raise self.fail
            code = messages[-1]["content"].split("New program:\n```python\n")[1].split("\n```")[0]
            return [sample(self.answers[code])]
        finally:
            self.in_flight -= 1


def test_the_verdict_comes_only_from_the_fixed_last_line() -> None:
    assert parse_category("It hard-codes 7.\nCATEGORY: 1") == "1"
    assert parse_category("reasoning\n  CATEGORY: 3  \n\n") == "3"
    assert parse_category("CATEGORY: 2\nactually no") == UNPARSED
    assert parse_category("CATEGORY: 5") == UNPARSED
    assert parse_category("**CATEGORY: 1**") == UNPARSED
    assert parse_category("Category 1") == UNPARSED
    assert parse_category("") == UNPARSED


def test_the_prompt_holds_the_case_and_asks_for_the_verdict_line() -> None:
    system, user = judge_messages(case(1))
    assert system["role"] == "system" and "CATEGORY: <1-4>" in system["content"]
    for category in ("Hard coding", "Logic overfitting", "Semantic drift", "Other"):
        assert category in system["content"]
    assert user["role"] == "user"
    for part in ("Print n.", "Test 1 failed: expected 7", "print(input())", "+print(7)"):
        assert part in user["content"]
    assert "previous program 50%, new program unknown (no hidden tests)" in user["content"]


def test_cases_are_judged_at_most_concurrency_at_a_time_in_case_order() -> None:
    codes = [f"print({i})" for i in range(7)]
    answers = {code: f"why\nCATEGORY: {i % 4 + 1}" for i, code in enumerate(codes)}
    answers[codes[5]] = "no idea"
    sampler = ScriptedSampler(answers)
    run = asyncio.run(
        judge_cases(sampler, [case(i, c) for i, c in enumerate(codes)], concurrency=2)
    )
    assert sampler.most_in_flight == 2
    assert [(v.case_id, v.category) for v in run.verdicts] == [
        (0, "1"), (1, "2"), (2, "3"), (3, "4"), (4, "1"), (5, UNPARSED), (6, "3")
    ]  # fmt: skip
    assert run.verdicts[5].raw_answer == "no idea"
    assert run.failures == [] and run.not_sent == 0
    assert {(p.temperature, p.n) for p in sampler.calls} == {(0.0, 1)}


def test_an_unreachable_endpoint_stops_the_cases_still_waiting() -> None:
    sampler = ScriptedSampler({}, fail=Unavailable("cannot reach the model endpoint"))
    run = asyncio.run(judge_cases(sampler, [case(i) for i in range(5)], concurrency=1))
    assert len(sampler.calls) == 1 and run.not_sent == 4
    assert [type(f) for f in run.failures] == [Unavailable] and run.verdicts == []


def test_other_failures_keep_going_and_are_returned() -> None:
    sampler = ScriptedSampler({}, fail=UpstreamError("answered 500", status_code=500))
    run = asyncio.run(judge_cases(sampler, [case(i) for i in range(3)], concurrency=2))
    assert len(sampler.calls) == 3 and len(run.failures) == 3 and run.not_sent == 0
