"""`cobalt experiment`: routes only; the work is in pipeline.py and report.py.

Exit statuses: 0 done; 1 a step or a service failed; 2 bad options; 130 interrupted.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from cobalt.demo.cli import (
    InferenceUrlOption,
    ModelOption,
    ServedModelOption,
    exit_statuses,
    fail_with,
)
from cobalt.demo.experiment.plan import ARM_NAMES, DEFAULT_WORK_DIR, ExperimentOptions
from cobalt.shared import defaults
from cobalt.shared.cli import EXIT_USAGE
from cobalt.shared.reward_format import RewardFormat

__all__ = ["experiment_command"]

_DEFAULTS = ExperimentOptions()


def experiment_command(
    pool: Annotated[
        int,
        typer.Option(help="HumanEval problems (shortest reference solutions), split in halves."),
    ] = _DEFAULTS.pool,
    seed: Annotated[int, typer.Option(help="Seed of the training / held-out split.")] = 0,
    data: Annotated[
        str,
        typer.Option(
            help="humaneval (the bundled pool) or generated (one-function tasks from "
            "templates, screened by the base model: docs/datasets.md)."
        ),
    ] = _DEFAULTS.data,
    screen_instances: Annotated[
        int, typer.Option(help="Generated data: training candidates screened per template.")
    ] = _DEFAULTS.screen_instances,
    held_out: Annotated[
        int, typer.Option(help="Generated data: held-out instances of the kept templates.")
    ] = _DEFAULTS.held_out,
    train_instances: Annotated[
        int, typer.Option(help="Generated data: training instances of the kept templates.")
    ] = _DEFAULTS.train_instances,
    difficulty: Annotated[
        int, typer.Option(help="Generated data: the templates' difficulty, 1-3.")
    ] = _DEFAULTS.difficulty,
    screen_samples: Annotated[
        int, typer.Option(help="Base-model samples per candidate when selecting training problems.")
    ] = _DEFAULTS.screen_samples,
    select: Annotated[
        bool,
        typer.Option(help="Train only on candidates the base model solves sometimes, not always."),
    ] = True,
    samples: Annotated[
        int, typer.Option(help="Evaluation samples per problem.")
    ] = _DEFAULTS.samples,
    turns: Annotated[
        int, typer.Option(help="Feedback turns after turn 0 (evaluation, Cobalt's data).")
    ] = _DEFAULTS.turns,
    steps: Annotated[
        int, typer.Option(help="GRPO steps of the single-step arms.")
    ] = _DEFAULTS.steps,
    contexts_per_step: Annotated[
        int, typer.Option(help="Contexts per step of the single-step arms.")
    ] = _DEFAULTS.contexts_per_step,
    group_size: Annotated[
        int, typer.Option(help="GRPO group: responses per context.")
    ] = _DEFAULTS.group_size,
    episode_turns: Annotated[
        int, typer.Option(help="Turns per online episode (multi-turn, VeRPO), turn 0 included.")
    ] = _DEFAULTS.episode_turns,
    arms: Annotated[
        str, typer.Option(help=f"Comma-separated, of: {', '.join(ARM_NAMES)}.")
    ] = ",".join(_DEFAULTS.arms),
    max_tokens: Annotated[int, typer.Option(help="Longest response.")] = _DEFAULTS.max_tokens,
    max_context_tokens: Annotated[
        int, typer.Option(help="Longest bandit context kept (prompt tokens).")
    ] = _DEFAULTS.max_context_tokens,
    max_model_len: Annotated[
        int, typer.Option(help="Context length of the vLLM it starts.")
    ] = _DEFAULTS.max_model_len,
    lr: Annotated[float, typer.Option(help="AdamW learning rate of every arm.")] = _DEFAULTS.lr,
    reward_format: Annotated[
        RewardFormat, typer.Option(help="instruct (SmolLM2) or reasoning (the paper's rules).")
    ] = RewardFormat.INSTRUCT,
    temperature: Annotated[
        float, typer.Option(help="Sampling temperature.")
    ] = defaults.TEMPERATURE,
    work_dir: Annotated[
        Path, typer.Option(help="Converted model, checkpoints, logs, state and the report.")
    ] = DEFAULT_WORK_DIR,
    model: ModelOption = None,
    served_model: ServedModelOption = None,
    inference_url: InferenceUrlOption = None,
    ui_port: Annotated[int, typer.Option(help="Port of the orchestrator API.")] = _DEFAULTS.ui_port,
) -> None:
    """The pre-declared comparison on this machine: base model, Cobalt, single-turn GRPO and
    multi-turn online GRPO (and VeRPO with --arms), each trained from the base weights with
    the same number of sampled responses, evaluated per turn on held-out and training
    HumanEval problems with 95% intervals, in a markdown report with curves.

    Interrupted, it resumes: a re-run with the same options reuses every finished run and
    training job (docs/experiments.md). The defaults take about 47 minutes on 2 CPU cores.
    """
    try:
        options = ExperimentOptions(
            pool=pool,
            seed=seed,
            data=data,
            screen_instances=screen_instances,
            held_out=held_out,
            train_instances=train_instances,
            difficulty=difficulty,
            screen_samples=screen_samples,
            select=select,
            samples=samples,
            turns=turns,
            steps=steps,
            contexts_per_step=contexts_per_step,
            group_size=group_size,
            episode_turns=episode_turns,
            arms=tuple(a.strip() for a in arms.split(",") if a.strip()),
            max_tokens=max_tokens,
            max_context_tokens=max_context_tokens,
            max_model_len=max_model_len,
            lr=lr,
            reward_format=reward_format,
            temperature=temperature,
            work_dir=work_dir,
            model=model,
            served_model=served_model,
            inference_url=inference_url,
            ui_port=ui_port,
        )
    except ValueError as exc:
        raise fail_with(EXIT_USAGE, str(exc)) from exc
    from cobalt.demo.experiment.pipeline import run_experiment
    from cobalt.demo.progress import DemoProgress

    started = time.monotonic()
    with (
        exit_statuses(
            options.work_dir, interrupted="interrupted; run the same command again to resume"
        ),
        DemoProgress() as progress,
    ):
        result = run_experiment(options, progress)
    typer.echo(f"report: {result.report_path}")
    typer.echo(f"experiment finished in {(time.monotonic() - started) / 60:.1f} min", err=True)
