"""`cobalt trainer serve`: the trainer process of one training job.

The trainer needs torch, transformers and verl, which live in `.venv-trainer` (their pins
clash with vLLM's). Run from another environment, the command re-executes itself with
that environment's interpreter (`COBALT_TRAINER_PYTHON`, default `.venv-trainer/bin/python`
of this checkout), so `cobalt trainer serve` works from the core `cobalt` command too.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from cobalt.shared.checkout import checkout_python
from cobalt.shared.cli import (
    EXIT_FAILED,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    interrupted,
    settings_or_exit,
)
from cobalt.shared.cli import fail as _fail
from cobalt.shared.errors import CobaltError, Unavailable, UpstreamError
from cobalt.shared.logging import configure_logging

# The settings hold the trainer's hyperparameters (pydantic contracts): imported when the
# command runs, not for `cobalt trainer --help`.
if TYPE_CHECKING:
    from cobalt.shared.clients import TrainingClient
    from cobalt.shared.trackers import TrackerSettings
    from cobalt.trainer.settings import TrainerSettings
    from cobalt.trainer.tracking import JobTracking

__all__ = ["trainer_app"]

_REEXEC_MARKER = "COBALT_TRAINER_REEXECUTED"

trainer_app = typer.Typer(
    help="The GRPO trainer process (torch, verl; runs in .venv-trainer).",
    no_args_is_help=True,
)


@trainer_app.callback()
def trainer_group() -> None:
    """The GRPO trainer process (torch, verl; runs in .venv-trainer)."""
    # A callback keeps `serve` a subcommand when this app runs alone (python -m).


def _settings() -> TrainerSettings:
    from cobalt.trainer.settings import TrainerSettings

    return settings_or_exit(TrainerSettings, "COBALT_TRAINER_*")


def _tracker_settings() -> TrackerSettings:
    from cobalt.shared.trackers import TrackerSettings

    return settings_or_exit(TrackerSettings, "COBALT_REPORT_TO, COBALT_TENSORBOARD_DIR")


def _has_trainer_packages() -> bool:
    return all(importlib.util.find_spec(name) is not None for name in ("torch", "verl"))


def _trainer_python(settings: TrainerSettings) -> Path:
    return settings.python or checkout_python(".venv-trainer")


@trainer_app.command("serve")
def serve(
    job: Annotated[int, typer.Option("--job", help="The training job (`cobalt train start`).")],
    steps: Annotated[
        int | None,
        typer.Option(
            "--steps",
            help="Stop this process after this many steps (default: the job's budget, or "
            "until it is stopped).",
        ),
    ] = None,
    until_step: Annotated[
        int | None,
        typer.Option("--until-step", help="Stop once the job has done this many steps."),
    ] = None,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume/--no-resume",
            help="Continue from the job's newest checkpoint (default), or start over.",
        ),
    ] = True,
) -> None:
    """Train job JOB: start rollout rounds, claim each step's scored groups, take the GRPO
    updates, checkpoint, load the new weights into the inference service, report the step.
    Settings: COBALT_TRAINER_ORCHESTRATOR_URL, _ORCHESTRATOR_TOKEN, _INFERENCE_URL,
    _CHECKPOINT_DIR, _DEVICE."""
    settings = _settings()
    _tracker_settings()  # a bad COBALT_REPORT_TO exits 2 here, before any re-execution
    if not _has_trainer_packages():
        arguments = ["serve", "--job", str(job), "--resume" if resume else "--no-resume"]
        if steps is not None:
            arguments += ["--steps", str(steps)]
        if until_step is not None:
            arguments += ["--until-step", str(until_step)]
        _reexec(settings, arguments)
    configure_logging(settings.log_level, json_lines=settings.log_json)
    _run(settings, job, steps=steps, until_step=until_step, resume=resume)


@trainer_app.command("export")
def export(
    job: Annotated[int, typer.Option("--job", help="The LoRA training job.")],
    out: Annotated[Path, typer.Option("--out", help="Directory to write the merged model to.")],
    step: Annotated[
        int | None, typer.Option("--step", help="The step's adapter [the newest published].")
    ] = None,
    base_model: Annotated[
        Path | None,
        typer.Option("--base-model", help="The base model directory [the adapter's record]."),
    ] = None,
) -> None:
    """Merge a LoRA job's adapter into its base model (peft's merge_and_unload) and write
    a plain model directory that any server loads, LoRA support or not.
    Settings: COBALT_TRAINER_CHECKPOINT_DIR."""
    settings = _settings()
    if not _has_trainer_packages():
        arguments = ["export", "--job", str(job), "--out", str(out)]
        if step is not None:
            arguments += ["--step", str(step)]
        if base_model is not None:
            arguments += ["--base-model", str(base_model)]
        _reexec(settings, arguments)
    configure_logging(settings.log_level, json_lines=settings.log_json)
    from cobalt.trainer.export import ExportError, export_merged

    try:
        written = export_merged(
            settings.checkpoint_dir, job, out, step=step, base_model_dir=base_model
        )
    except ExportError as exc:
        raise _fail(EXIT_USAGE, str(exc)) from exc
    typer.echo(
        f"training job {job}: step {written.step} (policy version "
        f"{written.policy_version}) merged into {out}"
    )


def _reexec(settings: TrainerSettings, arguments: list[str]) -> None:
    """Run `python -m cobalt.trainer ARGUMENTS` in the trainer environment instead."""
    python = _trainer_python(settings)
    # Not resolved: every venv's python links to the same base interpreter. The marker
    # stops an environment without torch from re-executing itself for ever.
    if not python.exists() or os.environ.get(_REEXEC_MARKER):
        raise _fail(
            EXIT_USAGE,
            f"torch and verl are not installed here and {python} does not "
            "have them; run `make setup` (it creates .venv-trainer)",
        )
    os.environ[_REEXEC_MARKER] = "1"
    os.execv(str(python), [str(python), "-m", "cobalt.trainer", *arguments])


def _run(
    settings: TrainerSettings,
    job_id: int,
    *,
    steps: int | None,
    until_step: int | None,
    resume: bool,
) -> None:
    from cobalt.shared.clients import TrainingClient
    from cobalt.trainer.loop import JobStopped, TrainerRun
    from cobalt.trainer.metrics import StepGauges
    from cobalt.trainer.replicas import InferenceReplicas
    from cobalt.trainer.volume import CheckpointVolumeError

    gauges = StepGauges(job_id)
    # Under torchrun the ranks share one host's ports: rank 0 serves the metrics.
    if settings.metrics_port is not None and os.environ.get("RANK", "0") == "0":
        gauges.serve(settings.metrics_port)
    inference = (
        InferenceReplicas(
            settings.inference_url,
            token=settings.inference_token,
            timeout_s=settings.publish_timeout_s,
        )
        if settings.inference_url
        else None
    )
    with TrainingClient(
        settings.orchestrator_url, token=settings.orchestrator_token
    ) as orchestrator:
        tracking = _tracking(settings, orchestrator, job_id)

        def on_step(step: int, policy_version: int, metrics: dict[str, float]) -> None:
            gauges.record(step, policy_version, metrics)
            if tracking is not None:
                tracking.record(step, policy_version, metrics)

        run = TrainerRun(settings, job_id, orchestrator, inference, on_step=on_step)
        try:
            last = run.run(resume=resume, max_steps=steps, until_step=until_step)
        except JobStopped as stopped:
            typer.echo(f"stopped: {stopped}")
            return
        except KeyboardInterrupt:
            # The step in flight is lost; its groups stay claimed for this job, and the
            # next trainer replays the step from the newest resume state (docs/trainer.md).
            raise interrupted(
                f"training job {job_id} left mid-step; `cobalt trainer serve --job {job_id}` "
                "resumes it from its last checkpoint"
            ) from None
        except (Unavailable, UpstreamError) as exc:
            raise _fail(EXIT_UNREACHABLE, str(exc)) from exc
        except CheckpointVolumeError as exc:  # not the caller's mistake: the volume's
            raise _fail(EXIT_FAILED, f"training job {job_id}: {exc}") from exc
        except CobaltError as exc:
            raise _fail(EXIT_USAGE, str(exc)) from exc
        finally:
            if tracking is not None:
                tracking.close()
            if run.arrivals is not None:
                run.arrivals.close()
    typer.echo(f"training job {job_id}: step {last} done")


def _tracking(
    settings: TrainerSettings, orchestrator: TrainingClient, job_id: int
) -> JobTracking | None:
    """The job's experiment trackers, opened on rank 0 (the others report nothing)."""
    from cobalt.trainer.tracking import JobTracking

    if os.environ.get("RANK", "0") != "0":
        return None
    try:
        return JobTracking.open(orchestrator.job(job_id), settings, _tracker_settings())
    except (Unavailable, UpstreamError) as exc:
        raise _fail(EXIT_UNREACHABLE, str(exc)) from exc
    except CobaltError as exc:
        raise _fail(EXIT_USAGE, str(exc)) from exc
