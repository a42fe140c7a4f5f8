"""`cobalt experiment`: routes only; the work is in pipeline.py and report.py, the plan it
prints first in estimate.py. Its options are ExperimentOptions' fields, generated
(`cobalt.orchestrator.options`), but --arms (a comma-separated list) and --dry-run.

Exit statuses: 0 done (or --dry-run); 1 a step or a service failed; 2 bad options;
130 interrupted.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer
from pydantic import ValidationError

from cobalt.demo.cli import exit_statuses, fail_with
from cobalt.demo.experiment.estimate import help_estimate
from cobalt.demo.experiment.plan import ARM_NAMES, ExperimentOptions
from cobalt.demo.options import usage_error
from cobalt.orchestrator.options import OptionGroup, model_options
from cobalt.shared.cli import EXIT_USAGE

__all__ = ["experiment_command"]

_DEFAULTS = ExperimentOptions()


@model_options(OptionGroup(ExperimentOptions, into="chosen", unset=False, skip=frozenset({"arms"})))
def experiment_command(
    chosen: dict[str, Any],
    arms: Annotated[
        str, typer.Option(help=f"Comma-separated, of: {', '.join(ARM_NAMES)}.")
    ] = ",".join(_DEFAULTS.arms),
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run", help="Print the plan (arms, sizes, time, disk, memory, store) and stop."
        ),
    ] = False,
) -> None:
    try:
        options = ExperimentOptions(
            **chosen, arms=tuple(a.strip() for a in arms.split(",") if a.strip())
        )
        from cobalt.demo.experiment.estimate import plan_lines
        from cobalt.demo.store import choose_store

        store = choose_store(options.store)
    except ValidationError as exc:
        raise fail_with(EXIT_USAGE, usage_error(exc)) from exc
    except ValueError as exc:
        raise fail_with(EXIT_USAGE, str(exc)) from exc
    for line in [*store.lines("experiment"), *plan_lines(options)]:  # stderr: errors only
        typer.echo(line)
    if dry_run:
        return
    from cobalt.demo.experiment.pipeline import run_experiment
    from cobalt.demo.progress import DemoProgress

    started = time.monotonic()
    with (
        exit_statuses(
            options.work_dir, interrupted="interrupted; run the same command again to resume"
        ),
        DemoProgress() as progress,
    ):
        result = run_experiment(options, store.url, progress)
    typer.echo(f"report: {result.report_path}")
    typer.echo(f"experiment finished in {(time.monotonic() - started) / 60:.1f} min", err=True)


experiment_command.__doc__ = f"""The pre-declared comparison on this machine: base model,
Cobalt, the shuffled-reward control, single-turn GRPO and multi-turn online GRPO (and VeRPO with
--arms), each trained from the base weights with the same number of sampled responses,
evaluated per turn with 95% intervals (generated data: on a validation split beside the
training curves, the held-out split read once at the end), in a markdown report.

It prints its plan first (arms, sizes, the estimated time on this CPU, disk and memory,
the store); --dry-run prints only that. Interrupted, it resumes: a re-run with the same
options reuses every finished run and training job (docs/experiments.md). {help_estimate()}
"""
