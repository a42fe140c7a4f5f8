"""What the experiment runs, decided before anything runs: the options, the problem split,
the arms and their equal training budgets, and the keys that make a re-run reuse what an
interrupted one finished. Nothing here reads a result except `select_training_problems`,
which reads the base model's screening run on the TRAINING candidates only.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import model_validator

from cobalt.demo.options import StackOptions
from cobalt.shared.contracts.training import TrainingMode

__all__ = [
    "ARM_NAMES",
    "DEFAULT_WORK_DIR",
    "Arm",
    "ExperimentOptions",
    "Split",
    "arms_of",
    "pool_rows",
    "select_training_problems",
    "split_pool",
]

DEFAULT_WORK_DIR = Path(".cobalt-experiment")
"""Relative to where it runs (the checkout for `make experiment`); gitignored."""

ARM_NAMES = ("base", "cobalt", "shuffled", "single_turn", "multi_turn", "verpo")
"""Every arm there is, in the report's order; `base` is never trained. `shuffled` is the
control: Cobalt's training with each group's rewards permuted (`reward_shuffle_seed`)."""

_MODES = {
    "cobalt": TrainingMode.COBALT,
    "shuffled": TrainingMode.COBALT,
    "single_turn": TrainingMode.SINGLE_TURN,
    "multi_turn": TrainingMode.MULTI_TURN,
    "verpo": TrainingMode.VERPO,
}


class ExperimentOptions(StackOptions):
    """The experiment's sizes; docs/experiments.md derives the defaults from measured costs.
    Each field's docstring is its option's help (`cobalt experiment --help`)."""

    pool: int = 40
    """HumanEval problems used: the N with the shortest reference solutions (a property of
    the data, not of any result), split by --seed into halves (not used with generated data)."""
    data: str = "generated"
    """generated (one-function tasks from templates, screened by the base model;
    docs/datasets.md, "Generated problems") or humaneval (the bundled pool, out of a 135M
    model's reach: docs/experiments.md has the options of its two declared runs)."""
    rescreen: bool = False
    """Generated data: screen the templates with the base model (--screen-instances each)
    instead of reading SmolLM2's recorded screening (docs/experiments/
    generated-screening-t0.6.json), which is read only for the default model at difficulty 1
    and temperature 0.6; any other is screened."""
    screen_instances: int = 4
    """Generated data: training candidates screened per template (train-split instances)."""
    held_out: int = 200
    """Generated data: held-out instances (200 x --samples 4 detects +0.09 with power 0.87
    at the base rates measured on such tasks; docs/experiments.md). Read once, at the end."""
    validation: int = 0
    """Generated data: validation-split instances of the kept templates, on which every arm
    is evaluated beside its training curve: where choices are made, never on held-out. The
    defaults were chosen on a pilot's (docs/experiments.md), so a default run has none."""
    train_instances: int = 64
    """Generated data: training instances of the kept templates; Cobalt's contexts are cut
    from the base's run on them (64 x 4 samples give ~220 contexts, 16 steps use 64)."""
    difficulty: int = 1
    """Generated data: the templates' difficulty (1-3)."""
    seed: int = 0
    """Seeds the split, the generated instances and, with --paired-sampling, every run's
    sampling (and names the runs: another seed is another experiment)."""
    screen_samples: int = 4
    """Base-model samples per training candidate in the screening run that selects the
    training problems (its own samples: the base's measured rate is not the selection's)."""
    select: bool = True
    """Keep only training candidates whose base pass rate in screening is neither 0 nor 1
    (generated: within [0.1, 0.9]); --no-select keeps every candidate."""
    samples: int = 4
    """Evaluation samples per problem (trajectories of turn 0 plus --turns feedback turns)."""
    turns: int = 1
    """Feedback turns after turn 0, in Cobalt's offline collection (the base's run on the
    training problems) and, unless --eval-turns, in evaluation."""
    eval_turns: int | None = None
    """Feedback turns in the evaluation runs on validation and held-out problems (default
    --turns); 0 evaluates first answers only, at about half the cost per trajectory."""
    steps: int = 16
    """GRPO steps of the single-step arms (Cobalt, shuffled, single-turn)."""
    contexts_per_step: int = 4
    """Contexts per step of the single-step arms (an episode arm takes fewer: equal budgets)."""
    group_size: int = 4
    """GRPO group: responses per context."""
    episode_turns: int = 2
    """Turns per online episode (multi-turn, VeRPO), turn 0 included; every episode runs
    them all, so a step samples contexts x group x episode_turns responses."""
    arms: tuple[str, ...] = ("base", "cobalt", "shuffled")
    """The arms run, in the report's order (--arms, comma-separated; base is always one;
    single_turn, multi_turn and verpo on request: each adds a training and an evaluation)."""
    shuffle_seed: int = 0
    """The shuffled-reward control's seed: its job's `reward_shuffle_seed` (one permutation
    of the rewards per group), declared before it runs."""
    max_tokens: int = 128
    """Longest response, in rollouts and in training (generated tasks' answers end at their
    code, ~45 tokens; HumanEval's runs used 256)."""
    lr: float = 2e-5
    """AdamW learning rate of every arm (choose another from the training curves and the
    validation split, never from held-out Pass@1)."""
    kl_coef: float = 0.0
    """Weight of every arm's KL-to-reference loss (the paper's is 1e-4). 0: no reference
    model, and the responses of groups whose rewards were all equal skip the update's
    forward and backward (their gradient is 0), a third of it at these sizes. At 1e-4 the
    term's gradient per token was at most ~1e-4 of the policy gradient's in the declared
    runs (docs/experiments.md, "Generated data")."""
    updates_per_step: int | None = 1
    """AdamW updates per GRPO step of every trained arm (its groups split into that many
    mini-batches; it must divide the arm's contexts per step). 1 since pilot 8 (a change of
    the method's parameters: the paper's is 2): every update is on the weights that
    sampled, so the ratio is the trainer's probability over the sampler's for the same
    weights (1 up to their numerical mismatch), and on the validation split Cobalt gained
    more and the shuffled control stayed below the base (docs/experiments.md, pilots 7 and
    8). None: the paper's 2 where the contexts split evenly, else 1, and the keys of runs
    made before the option existed."""
    work_dir: Path = DEFAULT_WORK_DIR
    """Converted model, checkpoints, logs, state and the report (not the store: --store)."""
    ui_port: int = 8300
    """Port of the orchestrator API."""

    @model_validator(mode="after")
    def _sizes(self) -> ExperimentOptions:
        for name in (
            "pool",
            "screen_samples",
            "samples",
            "steps",
            "contexts_per_step",
            "episode_turns",
            "max_tokens",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be at least 1")
        if self.pool < 4:
            raise ValueError("--pool must be at least 4 (two training and two held-out problems)")
        if self.eval_turns is not None and self.eval_turns < 0:
            raise ValueError("--eval-turns must be at least 0")
        if self.kl_coef < 0:
            raise ValueError("--kl-coef must be at least 0")
        if self.updates_per_step is not None and self.updates_per_step < 1:
            raise ValueError("--updates-per-step must be at least 1")
        if (
            min(self.held_out, self.screen_instances) < 1
            or self.validation < 0
            or self.train_instances < 2
            or self.difficulty not in (1, 2, 3)
        ):
            raise ValueError(
                "--held-out and --screen-instances must be at least 1, --validation at least 0, "
                "--train-instances at least 2, --difficulty 1-3"
            )
        if self.turns < 1:
            raise ValueError("--turns must be at least 1 (the bandit builder needs feedback turns)")
        if self.group_size < 2:
            raise ValueError("--group-size must be at least 2 (GRPO compares within a group)")
        unknown = [arm for arm in self.arms if arm not in ARM_NAMES]
        if unknown or not self.arms or "base" not in self.arms:
            raise ValueError(
                f"--arms: {', '.join(unknown) or 'base missing'}; the arms are "
                f"{', '.join(ARM_NAMES)} and base is always one (every arm is compared to it)"
            )
        self._check_stack(self.max_tokens)
        arms_of(self)  # the budgets must divide evenly
        return self

    @property
    def splits(self) -> tuple[str, ...]:
        """The evaluation splits, in the order they are read: held-out last, once."""
        if self.data == "generated":
            return ("train", "validation", "held_out") if self.validation else ("train", "held_out")
        return ("train", "held_out")

    @property
    def recorded_screening(self) -> bool:
        """Whether the kept templates are read from SmolLM2's recorded screening: generated
        data, not --rescreen, the default model, and the record's difficulty and
        temperature (a screening is the model's and the sampling's, not the seed's)."""
        from cobalt.orchestrator.datasets.generated.screened import SMOLLM2_TEMPERATURE

        return (
            self.data == "generated"
            and not self.rescreen
            and self.model is None
            and self.difficulty == 1
            and self.temperature == SMOLLM2_TEMPERATURE
        )

    def splits_of(self, trained: bool) -> tuple[str, ...]:
        """The splits an arm is evaluated on. With generated data a trained arm skips the
        training problems: its training curve shows them, and validation is where it is
        compared before held-out (HumanEval experiments are unchanged)."""
        if trained and self.data == "generated":
            return tuple(split for split in self.splits if split != "train")
        return self.splits

    def turns_on(self, split: str) -> int:
        """Feedback turns of the runs on `split`: the training problems' run feeds Cobalt's
        contexts, so it always has --turns."""
        if split == "train" or self.eval_turns is None:
            return self.turns
        return self.eval_turns

    def identity(self) -> dict[str, Any]:
        """What makes two runs the same experiment (not where it works or stores, which
        port, which arms; the control's seed is its arm's own parameter)."""
        skip = {"work_dir", "ui_port", "inference_url", "arms", "store", "shuffle_seed"}
        if self.eval_turns is None:  # keys of experiments from before --eval-turns
            skip.add("eval_turns")
        if self.updates_per_step is None:  # ... and from before --updates-per-step
            skip.add("updates_per_step")
        if self.data == "humaneval":  # keys of experiments from before --data stay the same
            skip |= {
                "data",
                "screen_instances",
                "held_out",
                "validation",
                "train_instances",
                "difficulty",
            }
        return {k: v for k, v in self.as_dict().items() if k not in skip}


TRAINING_ONLY = frozenset(
    {
        "steps",
        "contexts_per_step",
        "group_size",
        "episode_turns",
        "lr",
        "kl_coef",
        "shuffle_seed",
        "updates_per_step",
    }
)
"""Options that change how an arm trains and nothing that the base samples or is judged on."""


@dataclass(frozen=True)
class Arm:
    """One arm: how it trains (none for base) and its budget."""

    name: str
    mode: TrainingMode | None
    steps: int = 0
    contexts_per_step: int = 0
    responses_per_step: int = 0
    """Responses each step samples and trains on (every turn of an episode counts)."""
    params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def budget(self) -> int:
        """Responses sampled for training over the whole job."""
        return self.steps * self.responses_per_step

    def key(self, options: ExperimentOptions) -> str:
        """The arm's name in the store: its job is `exp-<arm>-<hash of the config>`. The
        base is never trained, so the training options do not name its runs: a run with
        another --lr or --steps reuses the base's runs (a sweep on validation costs only
        the trained arms)."""
        identity = options.identity()
        if self.mode is None:
            identity = {k: v for k, v in identity.items() if k not in TRAINING_ONLY}
        blob = json.dumps([self.name, identity, dict(self.params)], sort_keys=True)
        return f"exp-{self.name.replace('_', '-')}-{hashlib.sha256(blob.encode()).hexdigest()[:10]}"


def arms_of(options: ExperimentOptions) -> list[Arm]:
    """The arms with equal budgets: a single-step arm samples contexts x group responses per
    step; an episode arm samples episode_turns times that per context, so it takes
    1/episode_turns of the contexts per step where they divide, else of the steps.

    Raises:
        ValueError: neither divides (the budgets could not be equal).
    """
    group, per_step, steps = options.group_size, options.contexts_per_step, options.steps
    trainer = {
        "n_samples": group,
        "max_response_tokens": options.max_tokens,
        "lr": options.lr,
        "kl_coef": options.kl_coef,
    }
    common: dict[str, Any] = {"temperature": options.temperature, "max_steps": steps}
    if options.data == "generated":
        # Cheap samples: answers end at their code (the fence stays; docs/rollouts.md).
        common["stop_at_code_end"] = True
    arms = []
    for name in sorted(set(options.arms), key=ARM_NAMES.index):  # base first
        if name == "base":
            arms.append(Arm("base", None))
            continue
        mode = _MODES[name]
        arm_steps, arm_contexts, turns = steps, per_step, 1
        params: dict[str, Any] = dict(common)
        if mode in (TrainingMode.MULTI_TURN, TrainingMode.VERPO):
            turns = options.episode_turns
            if per_step % turns == 0:
                arm_contexts = per_step // turns
            elif steps % turns == 0:
                arm_steps = steps // turns
            else:
                raise ValueError(
                    f"--episode-turns ({turns}) must divide --contexts-per-step or --steps, "
                    "so that every arm samples the same number of responses"
                )
            params.update(turns=turns, stop_on_pass=False, max_steps=arm_steps)
        if mode != TrainingMode.VERPO:
            params["reward_format"] = options.reward_format.value
        # Mini-batches must split a step evenly; 2 updates (the paper's) where they can.
        updates = options.updates_per_step or (2 if arm_contexts % 2 == 0 else 1)
        if arm_contexts % updates:
            raise ValueError(
                f"--updates-per-step ({updates}) must divide the {name} arm's contexts per "
                f"step ({arm_contexts}): each update takes whole groups"
            )
        params["trainer"] = {
            **trainer,
            "contexts_per_step": arm_contexts,
            "updates_per_step": updates,
        }
        if name == "shuffled":  # the control: Cobalt's job, rewards permuted per group
            params["trainer"]["reward_shuffle_seed"] = options.shuffle_seed
        arms.append(Arm(name, mode, arm_steps, arm_contexts, arm_contexts * group * turns, params))
    budgets = {arm.budget for arm in arms if arm.mode is not None}
    assert len(budgets) <= 1, budgets  # by construction above
    return arms


def pool_rows(pool: int) -> list[dict[str, Any]]:
    """The bundled HumanEval's `pool` problems with the shortest reference solutions."""
    from cobalt.orchestrator.datasets.importers import resolve_source

    source = resolve_source("humaneval", Path("bundled"))
    opener = gzip.open if source.suffix == ".gz" else open
    with opener(source, "rt", encoding="utf-8") as lines:
        rows = [json.loads(line) for line in lines if line.strip()]
    if pool > len(rows):
        raise ValueError(f"--pool {pool}: the bundled HumanEval has {len(rows)} problems")
    rows.sort(key=lambda row: (len(row["canonical_solution"].strip()), row["task_id"]))
    return rows[:pool]


@dataclass(frozen=True)
class Split:
    """Task ids of the training candidates and the held-out problems (disjoint)."""

    candidates: tuple[str, ...]
    held_out: tuple[str, ...]


def split_pool(task_ids: Sequence[str], seed: int) -> Split:
    """A seeded shuffle of the pool, its first half training candidates, the rest held out
    (sorted, so the split reads the same whatever order the pool came in)."""
    ordered = sorted(task_ids, key=lambda tid: int(tid.split("/")[-1]))
    random.Random(seed).shuffle(ordered)
    half = len(ordered) // 2
    return Split(tuple(sorted(ordered[:half])), tuple(sorted(ordered[half:])))


def select_training_problems(
    rates: Mapping[str, float], *, select: bool
) -> tuple[list[str], dict[str, str]]:
    """The training problems among the candidates, from the base model's screening pass
    rate over every turn and sample of each candidate; and why each other was left out.

    A rate of 0 or 1 gives GRPO groups whose rewards are mostly equal (no gradient);
    without `select` every candidate is kept.
    """
    kept, dropped = [], {}
    for task_id, rate in sorted(rates.items()):
        if select and rate <= 0.0:
            dropped[task_id] = "never solved by the base model in screening"
        elif select and rate >= 1.0:
            dropped[task_id] = "always solved by the base model in screening"
        else:
            kept.append(task_id)
    return kept, dropped
