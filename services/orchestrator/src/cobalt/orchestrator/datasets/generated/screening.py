"""Screening templates by the base model: keep those it solves sometimes.

RL at this scale turns what a model can sometimes do into what it does first time; a
group of samples carries a training signal only when some pass and some fail
(/work/shared/reference/small-rl-and-judge-clients.md, 3.2). So before training, each
template's instances are sampled with the base model at the training temperature, every
answer is judged on the hidden tests, and a template is kept when its pass rate p obeys
the rule fixed before the run: `low <= p <= high` (0.1 and 0.9 by default) over
`instances x n` samples. The instances come from the train split (never held-out tasks).

Every failed sample is also classified (`Outcome`): no code block, a syntax error, the
function missing or renamed, a runtime error, or a wrong answer, the kinds the
experiment's report shows.
"""

from __future__ import annotations

import ast
import asyncio
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from cobalt.orchestrator.datasets.generated.checking import BatchExecutor
from cobalt.orchestrator.datasets.generated.instances import GenerationSpec, generate_problems
from cobalt.orchestrator.datasets.generated.templates import templates_of
from cobalt.orchestrator.rollouts.prompts import PromptTemplate
from cobalt.orchestrator.rollouts.sampling import ChatSampler, SamplingParams
from cobalt.shared.contracts import (
    BatchExecuteRequest,
    Compare,
    ExecuteRequest,
    ProblemRow,
)
from cobalt.shared.contracts.executor import MAX_BATCH_REQUESTS
from cobalt.shared.extraction import extract_program

__all__ = [
    "Outcome",
    "ScreeningRule",
    "TemplateScreening",
    "judge_answers",
    "outcome_of",
    "screen_templates",
]

CONCURRENT_REQUESTS = 8
"""Chat requests in flight at once (each asks for n samples)."""


class Outcome(StrEnum):
    """What became of one answer."""

    PASSED = "passed"
    NO_CODE = "no_code"
    SYNTAX_ERROR = "syntax_error"
    WRONG_FUNCTION_NAME = "wrong_function_name"
    """The program defines no top-level function of the asked name (renamed or missing)."""
    RUNTIME_ERROR = "runtime_error"
    """A hidden test raised, or ran over a limit."""
    WRONG_ANSWER = "wrong_answer"


def _defines(program: str, fn_name: str) -> bool | None:
    """Whether `program` defines `fn_name` at top level; None when it does not parse."""
    try:
        tree = ast.parse(program)
    except (SyntaxError, ValueError):
        return None
    return any(
        isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == fn_name
        for node in tree.body
    )


def outcome_of(program: str | None, fn_name: str, verdicts: Sequence[str] | None) -> Outcome:
    """The outcome of one answer: its extracted program, and the executor's verdict on each
    hidden test (None when the program was not run). The verdicts may be fresh from the
    executor or the ones evaluation stored on the turn (`Turn.hidden_verdicts`)."""
    if program is None:
        return Outcome.NO_CODE
    defined = _defines(program, fn_name)
    if defined is None:
        return Outcome.SYNTAX_ERROR
    if not defined:
        return Outcome.WRONG_FUNCTION_NAME
    if verdicts is None:
        raise ValueError("a program that defines its function must have been run")
    if all(verdict == "accepted" for verdict in verdicts):
        return Outcome.PASSED
    if any(verdict not in ("accepted", "wrong_answer") for verdict in verdicts):
        return Outcome.RUNTIME_ERROR
    return Outcome.WRONG_ANSWER


def judge_answers(
    answers: Sequence[tuple[ProblemRow, str]],
    executor: BatchExecutor,
    *,
    compare: Compare = Compare.COBALT,
) -> list[Outcome]:
    """The outcome of each (problem, answer text), judged on the problem's hidden tests;
    programs that can run go to the executor in batches."""
    programs = [extract_program(text) for _, text in answers]
    runnable = [
        index
        for index, ((problem, _), program) in enumerate(zip(answers, programs, strict=True))
        if program is not None and _defines(program, problem.fn_name or "")
    ]
    verdicts: dict[int, list[str]] = {}
    for start in range(0, len(runnable), MAX_BATCH_REQUESTS):
        chunk = runnable[start : start + MAX_BATCH_REQUESTS]
        requests = [
            ExecuteRequest(
                code=programs[index] or "", tests=answers[index][0].hidden_tests, compare=compare
            )
            for index in chunk
        ]
        batch = executor.execute_batch(BatchExecuteRequest(requests=requests))
        for index, response in zip(chunk, batch.results, strict=True):
            verdicts[index] = [str(result.verdict) for result in response.results]
    return [
        outcome_of(program, problem.fn_name or "", verdicts.get(index))
        for index, ((problem, _), program) in enumerate(zip(answers, programs, strict=True))
    ]


@dataclass(frozen=True)
class ScreeningRule:
    """Keep a template when low <= p <= high over `instances` x `n` samples."""

    low: float = 0.1
    high: float = 0.9
    instances: int = 4
    n: int = 8

    def keeps(self, pass_rate: float) -> bool:
        return self.low <= pass_rate <= self.high

    def describe(self) -> str:
        return (
            f"keep a template when {self.low} <= p <= {self.high}, p = its pass rate over "
            f"{self.instances} train instances x {self.n} samples"
        )


@dataclass
class TemplateScreening:
    """One template's screening result."""

    template: str
    family: str
    samples: int = 0
    passed: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    kept: bool = False

    @property
    def pass_rate(self) -> float:
        return self.passed / self.samples if self.samples else 0.0

    def as_json(self) -> dict[str, Any]:
        return {
            "template": self.template,
            "family": self.family,
            "samples": self.samples,
            "passed": self.passed,
            "pass_rate": round(self.pass_rate, 4),
            "kept": self.kept,
            "outcomes": dict(sorted(self.outcomes.items())),
        }


def screening_problems(
    *, family: str, difficulty: int, seed: int, rule: ScreeningRule
) -> list[ProblemRow]:
    """`rule.instances` train instances of each template (fewer where the split holds
    fewer tasks)."""
    problems: list[ProblemRow] = []
    for template in templates_of(family):
        for count in range(rule.instances, 0, -1):
            spec = GenerationSpec(
                family=family,
                split="train",
                seed=seed,
                count=count,
                difficulty=difficulty,
                templates=[template.name],
            )
            try:
                problems += list(generate_problems(spec))
                break
            except ValueError:
                continue
    return problems


async def _sample_all(
    problems: Sequence[ProblemRow],
    sampler: ChatSampler,
    params: SamplingParams,
    prompt: PromptTemplate,
) -> list[list[str]]:
    gate = asyncio.Semaphore(CONCURRENT_REQUESTS)

    async def one(problem: ProblemRow) -> list[str]:
        async with gate:
            samples = await sampler.sample(prompt.initial_messages(problem), params)
        return [sample.text for sample in samples]

    return list(await asyncio.gather(*(one(problem) for problem in problems)))


async def screen_templates(
    *,
    problems: Sequence[ProblemRow],
    sampler: ChatSampler,
    params: SamplingParams,
    prompt: PromptTemplate,
    executor: BatchExecutor,
    rule: ScreeningRule,
) -> list[TemplateScreening]:
    """Sample `params.n` answers per problem, judge them, and apply `rule` per template
    (in the problems' template order)."""
    texts = await _sample_all(problems, sampler, params, prompt)
    answers = [
        (problem, text) for problem, group in zip(problems, texts, strict=True) for text in group
    ]
    outcomes = await asyncio.to_thread(judge_answers, answers, executor)
    by_template: dict[str, TemplateScreening] = {}
    for (problem, _), outcome in zip(answers, outcomes, strict=True):
        name = str(problem.source_metadata["template"])
        entry = by_template.setdefault(
            name, TemplateScreening(name, str(problem.source_metadata["family"]))
        )
        entry.samples += 1
        entry.passed += outcome == Outcome.PASSED
        entry.outcomes[outcome.value] += 1
    for entry in by_template.values():
        entry.kept = rule.keeps(entry.pass_rate)
    return list(by_template.values())
