"""Drawing generated problems: a spec in, ordinary `ProblemRow`s out.

An instance is a template with its constants, argument names and function name drawn.
Its *task* is the template with its constants: two instances that differ only in names
are the same task. The split a task belongs to is decided by the sha256 of the task
alone (70 % train, 10 % validation, 20 % heldout), so training, validation and held-out
instances are disjoint by construction, whatever the seeds and counts: no held-out task
is a training task under another name. Within one spec each task occurs once.

Drawing is deterministic: the spec (family, split, seed, difficulty, templates) seeds
one random stream, templates take turns in their order, and each turn draws until it
finds a task of the spec's split that the spec has not drawn yet. A template whose
tasks in this split run out is skipped from then on; the spec's count is refused when
all of them run out. A larger count extends a smaller one (its first rows are the same).

Tests are `CallTest`s: one public test (the feedback a model reads after a failed turn)
and hidden tests (the verdict): the input kinds' edge cases, then random inputs, no
input twice. Expected values come from running the template's reference solution here;
`checking.check_references` runs the stored rows through the executor, as importing
with `verify` does.
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from cobalt.orchestrator.datasets.generated.templates import (
    BASIC,
    DIFFICULTIES,
    INPUT_KINDS,
    Template,
    templates_of,
)
from cobalt.shared.contracts import CallTest, ProblemRow, StoredTest, TestStyle

__all__ = [
    "GENERATOR_VERSION",
    "SPLITS",
    "GenerationSpec",
    "Instance",
    "draw_instances",
    "generate_problems",
    "split_of",
]

GENERATOR_VERSION = 1
"""Bumped whenever the same spec would draw other problems (stored in every row)."""

Split = Literal["train", "validation", "heldout"]
SPLITS: tuple[Split, ...] = ("train", "validation", "heldout")
_SPLIT_BOUNDS: tuple[tuple[int, Split], ...] = ((70, "train"), (80, "validation"), (100, "heldout"))
"""Percentile of a task's hash -> its split."""

PUBLIC_TESTS = 1
RANDOM_HIDDEN_TESTS = 4
MAX_DRAWS_PER_TURN = 400
"""Draws one template's turn may take to find a new task of the split before it counts
as run out (a template with few tasks, such as one letter constant, runs out)."""
MAX_COUNT = 20_000


class GenerationSpec(BaseModel):
    """What to generate: the content of a `--format generated` file."""

    model_config = ConfigDict(extra="forbid")

    family: str = Field(default=BASIC, description="basic (all families) or one family")
    split: Split
    seed: int = 0
    count: int = Field(ge=1, le=MAX_COUNT)
    difficulty: int = Field(default=1, ge=min(DIFFICULTIES), le=max(DIFFICULTIES))
    templates: list[str] | None = Field(
        default=None, description="only these templates of the family (e.g. a screening's kept)"
    )


@dataclass(frozen=True)
class Instance:
    template: Template
    constants: dict[str, Any]
    function_name: str
    arg_names: list[str]

    @property
    def task(self) -> str:
        """The task's canonical text: template and constants, no names."""
        return json.dumps([self.template.name, sorted(self.constants.items())])

    @property
    def signature(self) -> str:
        return f"{self.function_name}({', '.join(self.arg_names)})"

    @property
    def statement(self) -> str:
        spec = self.template.render(self.template.spec, self.arg_names, self.constants)
        return f"Write a Python function `{self.signature}` that {spec}."

    @property
    def reference(self) -> str:
        body = self.template.render(self.template.body, self.arg_names, self.constants)
        lines = "\n".join(f"    {line}" for line in body.splitlines())
        return f"def {self.signature}:\n{lines}\n"


def split_of(task: str) -> Split:
    """The split of a task (its canonical text), from its sha256 alone."""
    percentile = int(hashlib.sha256(task.encode()).hexdigest()[:8], 16) % 100
    return next(split for bound, split in _SPLIT_BOUNDS if percentile < bound)


def _draw(template: Template, rng: random.Random, difficulty: int) -> Instance:
    arg_names: list[str] = []
    for kind in template.kinds:
        choices = [n for n in INPUT_KINDS[kind].names if n not in arg_names]
        arg_names.append(rng.choice(choices))
    return Instance(
        template=template,
        constants=template.constants(rng, difficulty),
        function_name=rng.choice(template.function_names),
        arg_names=arg_names,
    )


def draw_instances(spec: GenerationSpec) -> Iterator[Instance]:
    """`spec.count` instances of distinct tasks of `spec.split` (see the module's docstring).

    Raises:
        ValueError: unknown family or template, or the templates' tasks in the split run
            out before `spec.count`.
    """
    templates = templates_of(spec.family, spec.templates)
    rng = random.Random(
        f"v{GENERATOR_VERSION}:{spec.family}:{spec.split}:{spec.seed}:{spec.difficulty}:"
        f"{','.join(t.name for t in templates)}"
    )
    seen: set[str] = set()
    live = list(templates)
    produced = 0
    turn = 0
    while produced < spec.count:
        if not live:
            raise ValueError(
                f"the {spec.split} split of these templates holds only {produced} distinct "
                f"tasks at difficulty {spec.difficulty}; ask for fewer or allow more templates"
            )
        template = live[turn % len(live)]
        for _ in range(MAX_DRAWS_PER_TURN):
            instance = _draw(template, rng, spec.difficulty)
            if instance.task not in seen and split_of(instance.task) == spec.split:
                seen.add(instance.task)
                produced += 1
                turn += 1
                yield instance
                break
        else:
            live.remove(template)


def _call(function: Any, args: list[Any]) -> Any:
    return function(*copy.deepcopy(args))


def _inputs(instance: Instance, rng: random.Random, difficulty: int) -> list[list[Any]]:
    """Edge-case inputs first, then random ones; none twice."""
    kinds = [INPUT_KINDS[kind] for kind in instance.template.kinds]
    edges = [kind.edges(difficulty) for kind in kinds]
    inputs: list[list[Any]] = []
    for index in range(max(len(edge) for edge in edges)):
        inputs.append([edge[index % len(edge)] for edge in edges])
    wanted = len(inputs) + PUBLIC_TESTS + RANDOM_HIDDEN_TESTS
    for _ in range(50 * wanted):
        if len(inputs) >= wanted:
            break
        candidate = [kind.draw(rng, difficulty) for kind in kinds]
        if candidate not in inputs:
            inputs.append(candidate)
    return inputs


def _reference_function(instance: Instance) -> Any:
    namespace: dict[str, Any] = {}
    exec(instance.reference, namespace)  # our own template text, never user input
    return namespace[instance.function_name]


def problem_of(instance: Instance, spec: GenerationSpec, index: int) -> ProblemRow:
    """The stored problem of an instance: statement, tests, reference, provenance."""
    rng = random.Random(f"tests:{spec.seed}:{index}:{instance.task}")
    function = _reference_function(instance)
    inputs = _inputs(instance, rng, spec.difficulty)
    edge_count = len(inputs) - PUBLIC_TESTS - RANDOM_HIDDEN_TESTS
    tests: list[StoredTest] = [
        CallTest(fn_name=instance.function_name, args=args, expected=_call(function, args))
        for args in inputs
    ]
    public = tests[edge_count : edge_count + PUBLIC_TESTS]
    hidden = tests[:edge_count] + tests[edge_count + PUBLIC_TESTS :]
    content = {
        "statement": instance.statement,
        "tests": [t.model_dump(mode="json") for t in tests],
    }
    digest = hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()
    return ProblemRow(
        external_id=f"gen-{instance.template.name}-{digest[:16]}",
        statement=instance.statement,
        test_style=TestStyle.CALL,
        fn_name=instance.function_name,
        public_tests=public,
        hidden_tests=hidden,
        difficulty=str(spec.difficulty),
        source_metadata={
            "generator": "cobalt.generated",
            "generator_version": GENERATOR_VERSION,
            "family": instance.template.family,
            "template": instance.template.name,
            "task": instance.task,
            "split": spec.split,
            "seed": spec.seed,
            "index": index,
            "constants": instance.constants,
            "edge_tests": edge_count,
            "reference": instance.reference,
        },
    )


def generate_problems(spec: GenerationSpec) -> Iterator[ProblemRow]:
    """The problems of `spec`, in order (see the module's docstring).

    Raises:
        ValueError: see `draw_instances`.
    """
    for index, instance in enumerate(draw_instances(spec)):
        yield problem_of(instance, spec, index)
