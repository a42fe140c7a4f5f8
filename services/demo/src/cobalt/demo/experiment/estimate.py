"""What `cobalt experiment` will cost, said before it starts (and by --dry-run): the
arms, the responses each stage samples, the time on this CPU kind, the disk its
checkpoints take and the memory it peaks at. Arithmetic on the options and on costs
measured on this project's machines (docs/experiments.md, "Sizes"); nothing runs.

The costs are per data and per CPU kind (`COSTS`), measured on 2-vCPU machines of each
kind: on the AVX2-only kind vLLM and the trainer compute in float32, and how much slower
that is depends on the work (3x for generated tasks' sampling, ~1.2x for their GRPO
steps, 4x for HumanEval's demo).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cobalt.shared.cpu_dtype import NATIVE_BF16_FLAGS, read_cpu_flags

if TYPE_CHECKING:
    from cobalt.demo.experiment.plan import ExperimentOptions

__all__ = [
    "CpuKind",
    "Costs",
    "Estimate",
    "Stage",
    "cpu_kind",
    "estimate",
    "help_estimate",
    "plan_lines",
]


@dataclass(frozen=True)
class Costs:
    """What one unit of work costs on one CPU kind, measured there."""

    response_s: float
    """Seconds per sampled turn in a rollout run, its execution and evaluation included."""
    trained_s: float
    """Seconds of GRPO step per response trained on, the step's own sampling included."""


TRAINED_WITHOUT_KL = 0.69
"""A GRPO step's cost per trained response at --kl-coef 0 over its cost at the paper's
1e-4: pilot 5's training stages, the trainer's start taken out (docs/experiments.md;
AVX2 kind emulated on a Zen 4): seed 500 276 s against 398 s (0.69), seed 501 218 s
against 358 s (0.61); the larger, so that the plan does not promise less than a run took.
Applied to both kinds: derived for the native one."""

COSTS: dict[str, dict[bool, Costs]] = {
    # HumanEval (256-token answers): the native kind's seed-0 experiment of 2026-11-28; the
    # AVX2 kind taken 4x slower (the HumanEval demo's measured factor there). Trained with
    # the KL term then; every figure here is without it (KL_TERM_COST puts it back), so
    # those x TRAINED_WITHOUT_KL.
    "humaneval": {
        True: Costs(1.35, round(4.3 * TRAINED_WITHOUT_KL, 2)),
        False: Costs(1.35 * 4, round(4.3 * 4 * TRAINED_WITHOUT_KL, 2)),
    },
    # Generated data (brief prompts, answers ending at their code, 128 tokens at most).
    # AVX2 kind: measured on the kind itself (AMD EPYC Zen 3, 2026-12-07, the declared
    # seeds 0 and 1 at the defaults of a77d789, no KL term): 4,376 s of rollouts and hidden
    # tests over 10,624 turns (0.41 s) and 1,617 s of GRPO steps over 1,024 trained
    # responses, the trainers' starts taken out (1.58 s); the plan then said ~52 min where
    # the runs took 53.1 and 51.7 (docs/experiments.md). Those runs made two updates per
    # step, and their trained arms' answers shrank, so their rollouts were cheap; at one
    # update (the default since) the trained arms' answers stay as long as the base's. So
    # a turn costs what the base's runs cost on the kind, the larger of the two seeds: 948
    # s over 2,112 turns (seed 0; 909 s for seed 1), 0.45 s. Native kind: seed 1 on Zen 5
    # (0.21 s, 2.4 s) before the changes of 2026-12-06, divided by what they gave in
    # bfloat16 (top-p 1.44x, the trainer 1.26x), x TRAINED_WITHOUT_KL for the trained
    # responses: derived, an upper bound (seeds 4 and 5 took 20-25 min on a Zen 4).
    "generated": {
        True: Costs(0.15, round(1.9 * TRAINED_WITHOUT_KL, 2)),
        False: Costs(0.45, 1.58),
    },
}
"""Per data, per kind (True: native bfloat16): the costs the estimate multiplies, without
the KL term (`KL_TERM_COST` for a run with one). The
kinds differ by 3x in sampling but little in training on generated data, so one factor
between them would not do."""
KL_TERM_COST = 1 / TRAINED_WITHOUT_KL
"""A trained response's cost with a KL term (--kl-coef above 0) over its cost without."""
STARTUP_S = 60.0
"""vLLM's start and the services (the model is converted by `make setup` since
2026-12-07): 62 s measured on a Zen 4 as the AVX2 kind (pilot 5), 56 s vLLM's start on the
real AVX2 kind (README's HumanEval demo table); mostly loading, so the same for both."""
TRAINER_START_S = 45.0
"""torch, the model and the reference: per trained arm."""
KEPT_SHARE = 0.1
"""HumanEval: the share of candidates screening kept in both declared runs (2 of 20)."""
SMOLLM2_PARAMETERS = 134_515_008
CHECKPOINT_COPIES = 5
"""float32 copies of the weights an arm's checkpoints hold: two policy directories and a
resume state of weights and two AdamW moments."""
PEAK_MEMORY_GB = 10.6
"""Measured peak resident set of the experiment at its defaults with SmolLM2 (the
trainer beside vLLM; docs/experiments.md)."""


@dataclass(frozen=True)
class CpuKind:
    native_bf16: bool

    @property
    def label(self) -> str:
        if self.native_bf16:
            return "native bfloat16 (avx512_bf16/amx_bf16)"
        return "no native bfloat16 (AVX2-only kind: float32)"


NATIVE = CpuKind(native_bf16=True)
AVX2 = CpuKind(native_bf16=False)


def cpu_kind(flags: frozenset[str] | None = None) -> CpuKind:
    """This machine's kind, from /proc/cpuinfo (COBALT_CPUINFO in tests)."""
    present = read_cpu_flags() if flags is None else flags
    return NATIVE if present & set(NATIVE_BF16_FLAGS) else AVX2


@dataclass(frozen=True)
class Stage:
    name: str
    responses: int
    """Responses sampled."""
    seconds: dict[bool, float]
    """Per kind (True: native bfloat16)."""


@dataclass(frozen=True)
class Estimate:
    stages: list[Stage]
    """The start-up (STARTUP_S, the same on both kinds) comes before them."""
    checkpoint_gb_per_arm: float
    trained_arms: int
    model_gb: float

    def minutes(self, kind: CpuKind) -> float:
        return (STARTUP_S + sum(s.seconds[kind.native_bf16] for s in self.stages)) / 60

    @property
    def disk_gb(self) -> float:
        return self.checkpoint_gb_per_arm * self.trained_arms + self.model_gb


def _parameters(model: Path | None) -> int:
    """SmolLM2's, or a given model's from its weight files (bytes / bytes per value)."""
    if model is None:
        return SMOLLM2_PARAMETERS
    import json

    weights = sum(p.stat().st_size for p in model.glob("*.safetensors")) if model.is_dir() else 0
    if not weights:
        return SMOLLM2_PARAMETERS
    try:
        config = json.loads((model / "config.json").read_text(encoding="utf-8"))
        width = 4 if str(config.get("torch_dtype", "")).endswith("32") else 2
    except (OSError, ValueError):
        width = 2
    return weights // width


def estimate(options: ExperimentOptions) -> Estimate:
    """Responses and seconds per stage, and the disk, from the options alone."""
    from cobalt.demo.experiment.plan import arms_of

    costs = COSTS[options.data]
    if options.data == "generated":
        from cobalt.orchestrator.datasets.generated.templates import TEMPLATES

        candidates = 0 if options.recorded_screening else options.screen_instances * len(TEMPLATES)
        problems = {
            "train": options.train_instances,
            "validation": options.validation,
            "held_out": options.held_out,
        }
    else:
        candidates = options.pool // 2
        problems = {"train": max(2, round(candidates * KEPT_SHARE)), "held_out": candidates}
    screening = candidates * options.screen_samples * (options.turns + 1)
    stages: list[Stage] = []
    if candidates:
        seconds = {native: screening * c.response_s for native, c in costs.items()}
        stages.append(Stage(f"screening ({candidates} candidates)", screening, seconds))
    arms = arms_of(options)
    for arm in arms:
        # every turn of every trajectory: turn 0 and the split's feedback turns
        sampled = sum(
            problems[split] * options.samples * (options.turns_on(split) + 1)
            for split in options.splits_of(arm.mode is not None)
        )
        seconds = {native: sampled * c.response_s for native, c in costs.items()}
        if arm.mode is not None:
            kl_term = KL_TERM_COST if options.kl_coef > 0 else 1.0
            for native, c in costs.items():
                seconds[native] += TRAINER_START_S + arm.budget * c.trained_s * kl_term
                if arm.params.get("turns"):  # an episode arm samples its responses online
                    seconds[native] += arm.budget * c.response_s
            sampled += arm.budget
        stages.append(Stage(arm.name, sampled, seconds))
    parameters = _parameters(options.model)
    trained = sum(1 for arm in arms if arm.mode is not None)
    return Estimate(
        stages=stages,
        checkpoint_gb_per_arm=parameters * 4 * CHECKPOINT_COPIES / 1e9,
        trained_arms=trained,
        model_gb=parameters * 4 / 1e9,
    )


def _free_gb(path: Path) -> float | None:
    import shutil

    for folder in (path, *path.parents):
        if folder.exists():
            return shutil.disk_usage(folder).free / 1e9
    return None


def plan_lines(options: ExperimentOptions, kind: CpuKind | None = None) -> list[str]:
    """The plan as printed before the experiment starts (and by --dry-run)."""
    from cobalt.demo.experiment.plan import arms_of

    kind = kind or cpu_kind()
    found = estimate(options)
    arms = arms_of(options)

    def shown(split: str) -> str:
        return f"{split.replace('_', '-')} ({options.turns_on(split) + 1} turns)"

    compared = ", ".join(shown(split) for split in options.splits_of(trained=True))
    base_only = [s for s in options.splits_of(trained=False) if s not in options.splits_of(True)]
    lines = [
        f"plan: data {options.data}, seed {options.seed}, arms {', '.join(a.name for a in arms)}; "
        f"each evaluated on {compared}, {options.samples} samples per problem"
        + (f"; the base also on {', '.join(shown(s) for s in base_only)}" if base_only else "")
        + (
            "; held-out read once, after every arm has trained"
            if options.data == "generated"
            else ""
        ),
    ]
    if options.recorded_screening:
        lines.append(
            "  templates: SmolLM2's recorded screening (--rescreen to screen again); "
            "no screening run"
        )
    for arm in arms:
        if arm.mode is None:
            continue
        control = " (rewards shuffled within groups)" if arm.name == "shuffled" else ""
        lines.append(
            f"  {arm.name}: {arm.mode.value}{control}, {arm.steps} steps x "
            f"{arm.responses_per_step} responses = {arm.budget} trained responses"
        )
    lines.append("  stages, on this CPU:")
    lines.append(f"    start-up: ~{STARTUP_S / 60:.1f} min")
    for stage in found.stages:
        sampled = f"{stage.responses} responses, " if stage.responses else ""
        minutes = stage.seconds[kind.native_bf16] / 60
        lines.append(f"    {stage.name}: {sampled}~{minutes:.0f} min")
    if options.data == "humaneval":
        lines.append(
            f"  (HumanEval: assumes screening keeps {KEPT_SHARE:.0%} of the candidates, as "
            "measured; more kept, more minutes)"
        )
    lines.append(
        f"time: ~{found.minutes(kind):.0f} min on this CPU, {kind.label} "
        f"(~{found.minutes(NATIVE):.0f} min with native bfloat16, "
        f"~{found.minutes(AVX2):.0f} min AVX2-only)"
    )
    free = _free_gb(options.work_dir.expanduser().resolve())
    room = "" if free is None else f"; {free:.1f} GB free there"
    lines.append(
        f"disk: ~{found.disk_gb:.1f} GB in {options.work_dir} ({found.trained_arms} trained "
        f"arms x {found.checkpoint_gb_per_arm:.1f} GB of checkpoints, the converted model "
        f"{found.model_gb:.1f} GB){room}"
    )
    if free is not None and free < found.disk_gb:
        lines.append("warning: less free disk than the checkpoints need")
    lines.append(
        f"memory: ~{PEAK_MEMORY_GB} GB peak (measured at the defaults with SmolLM2: the "
        "trainer beside vLLM; more with larger --contexts-per-step, --group-size, --max-tokens "
        "or model)"
    )
    return lines


def help_estimate() -> str:
    """The defaults' estimate for both CPU kinds, for `--help` (this machine not read)."""
    from cobalt.demo.experiment.plan import ExperimentOptions

    found = estimate(ExperimentOptions())
    return (
        f"At the defaults: about {found.minutes(NATIVE):.0f} minutes on 2 cores with native "
        f"bfloat16 (avx512_bf16) and about {found.minutes(AVX2):.0f} minutes on the AVX2-only "
        f"kind (costs from runs on each, docs/experiments.md); ~{found.disk_gb:.0f} GB of "
        f"checkpoints and model, ~{PEAK_MEMORY_GB} GB peak memory; the plan printed first (and "
        "--dry-run) gives this machine's."
    )
