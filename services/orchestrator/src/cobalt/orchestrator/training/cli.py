"""`cobalt train start|list|show|stop|resume|export|export-verl`: training jobs in the store
(`cobalt train metrics`, a job's step metrics as a file, joins the group from
`results/cli.py` by its entry point).

A job only describes the training; its trainer process (`cobalt trainer serve --job ID`)
drives it: schedules rollout rounds, claims steps, trains and publishes weights.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from cobalt.orchestrator.console import (
    EXIT_USAGE,
    JsonOption,
    SamplingSetOption,
    echo_json,
    fail,
    handled,
    report_to_option,
    sampling_settings_set,
    store_context,
)
from cobalt.orchestrator.options import OptionGroup, model_options
from cobalt.shared.contracts.training import JobLiveness, TrainerHyperparameters, TrainingMode
from cobalt.shared.contracts.training_params import AnyModeTrainingParams
from cobalt.shared.tables import print_table

# The training service, the verl export and the store are imported by the commands that
# use them, so that `cobalt train --help` loads none of SQLAlchemy, Alembic or pyarrow.
if TYPE_CHECKING:
    from cobalt.shared.contracts import TrainingJobStatus
    from cobalt.shared.contracts.training import TrainingJobPublic

__all__ = ["train_app"]


train_app = typer.Typer(
    help=(
        "GRPO training jobs on a bandit dataset: start one, then run its trainer "
        "(`cobalt trainer serve --job ID`); list, show (metrics per step), stop, resume."
    ),
    no_args_is_help=True,
)


@train_app.command("start")
@model_options(
    OptionGroup(
        AnyModeTrainingParams,
        into="params",
        skip=frozenset({"trainer", "report_to"}),
        envvars={"base_url": "COBALT_POLICY_BASE_URL", "served_model": "COBALT_POLICY_MODEL"},
        deprecated={"turns": "episode_turns"},
    ),
    OptionGroup(TrainerHyperparameters, into="trainer"),
)
def start(
    contexts: Annotated[str, typer.Option("--contexts", help="The bandit dataset's name.")],
    model: Annotated[
        Path, typer.Option("--model", help="The policy model's directory (trainer, reward).")
    ],
    params: dict[str, Any],
    trainer: dict[str, Any],
    name: Annotated[str | None, typer.Option(help="Job name (default: CONTEXTS-<time>).")] = None,
    mode: Annotated[
        TrainingMode,
        typer.Option(
            help="Which contexts the job trains on and how they are rewarded (cobalt: every "
            'context of the bandit dataset; the others: docs/trainer.md, "Modes"); a '
            "mode's own settings are refused in the others."
        ),
    ] = TrainingMode.COBALT,
    report_to: Annotated[
        str | None,
        report_to_option(
            "Experiment trackers the trainer reports each step to",
            "the trainer's COBALT_REPORT_TO",
        ),
    ] = None,
    sampling_set: SamplingSetOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create a pending training job (defaults: the paper's settings).

    Every setting of the job's parameters is an option (`AnyModeTrainingParams` and
    GRPO's `TrainerHyperparameters`, generated from the models); one its mode lacks is
    refused with the reason."""
    from cobalt.orchestrator.training import service
    from cobalt.shared.contracts.training import TrainingJobCreate

    chosen: dict[str, Any] = {**params, **sampling_settings_set(sampling_set)}
    if report_to is not None:
        chosen["report_to"] = report_to
    if trainer:
        chosen["trainer"] = trainer
    request = TrainingJobCreate(
        name=name or f"{contexts}-{datetime.now(UTC):%Y%m%d-%H%M%S}",
        contexts=contexts,
        model=str(model.expanduser().resolve()),
        mode=mode,
        params=chosen,
    )
    store = store_context()
    sessions = store.sessions()
    with handled():
        job = service.job_public(sessions, service.create_job(sessions, request))
    _show(job, as_json=as_json)
    if not as_json:
        typer.echo(f"next: cobalt trainer serve --job {job.id}")


@train_app.command("list")
def list_jobs(as_json: JsonOption = False) -> None:
    """Every training job, newest first."""
    from cobalt.orchestrator.training import service

    store = store_context()
    with handled():
        jobs = service.list_jobs(store.sessions(), stale_after_s=store.settings.training_stale_s)
    if as_json:
        echo_json(jobs.model_dump(mode="json"))
        return
    table = Table("id", "name", "mode", "status", "step", "policy", "contexts", "groups r/c/s")
    for job in jobs.items:
        groups = f"{job.groups['ready']}/{job.groups['consumed']}/{job.groups['stale']}"
        table.add_row(
            str(job.id),
            job.name,
            job.mode,
            _status(job),
            str(job.step),
            str(job.policy_version),
            job.contexts or "-",
            groups,
        )
    print_table(table)


@train_app.command("show")
def show(job_id: Annotated[int, typer.Argument()], as_json: JsonOption = False) -> None:
    """A job: status, policy version and every step's metrics."""
    from cobalt.orchestrator.training import service

    store = store_context()
    with handled():
        job = service.job_public(
            store.sessions(), job_id, stale_after_s=store.settings.training_stale_s
        )
    _show(job, as_json=as_json)


def _set_status(job_id: int, status: TrainingJobStatus, as_json: bool) -> None:
    from cobalt.orchestrator.training import service

    store = store_context()
    sessions = store.sessions()
    with handled():
        service.set_job_status(sessions, job_id, status)
        job = service.job_public(sessions, job_id)
    _show(job, as_json=as_json)


@train_app.command("stop")
def stop(job_id: Annotated[int, typer.Argument()], as_json: JsonOption = False) -> None:
    """Stop a job: its trainer ends after the current step, queued rollouts are skipped."""
    from cobalt.shared.contracts import TrainingJobStatus

    _set_status(job_id, TrainingJobStatus.STOPPED, as_json)


@train_app.command("resume")
def resume(job_id: Annotated[int, typer.Argument()], as_json: JsonOption = False) -> None:
    """Mark a stopped or failed job running; then `cobalt trainer serve --job ID --resume`.

    A finished job (its step budget spent) has nothing left to do: refused with exit
    status 2, as the API refuses it (409). A stopped or failed job whose budget is spent
    ends finished instead of running: said."""
    from cobalt.orchestrator.training import service
    from cobalt.shared.contracts import TrainingJobStatus

    store = store_context()
    sessions = store.sessions()
    with handled():
        service.set_job_status(sessions, job_id, TrainingJobStatus.RUNNING)
        job = service.job_public(sessions, job_id)
    _show(job, as_json=as_json)
    if job.status == TrainingJobStatus.FINISHED:  # its spent budget finished it
        typer.echo(
            f"training job {job.id} has finished: {_budget(job)}; nothing left to do "
            "(start a new job to train further)",
            err=as_json,
        )


@train_app.command("export")
def export(
    job_id: Annotated[int, typer.Argument()],
    out: Annotated[Path, typer.Option("--out", help="Directory to write the merged model to.")],
    step: Annotated[
        int | None, typer.Option("--step", help="The step's adapter [the newest published].")
    ] = None,
    base_model: Annotated[
        Path | None,
        typer.Option("--base-model", help="The base model directory [the adapter's record]."),
    ] = None,
) -> None:
    """A LoRA job's adapter merged into its base model, as a plain model directory to serve
    elsewhere (runs `cobalt trainer export` in the trainer's environment)."""
    from cobalt.shared.commands import app

    arguments = ["trainer", "export", "--job", str(job_id), "--out", str(out)]
    if step is not None:
        arguments += ["--step", str(step)]
    if base_model is not None:
        arguments += ["--base-model", str(base_model)]
    app(arguments)


_VERL_HYPERPARAMETERS = frozenset(
    {"n_samples", "contexts_per_step", "updates_per_step", "lr", "kl_coef", "max_response_tokens"}
)
"""The GRPO settings the verl launch script carries."""


@train_app.command("export-verl")
@model_options(
    OptionGroup(
        TrainerHyperparameters,
        into="hyperparameters",
        skip=frozenset(TrainerHyperparameters.model_fields) - _VERL_HYPERPARAMETERS,
    )
)
def export_verl(
    contexts: Annotated[str, typer.Option("--contexts", help="The bandit dataset to train on.")],
    out: Annotated[Path, typer.Option("--out", help="Directory to write into.")],
    model: Annotated[
        str, typer.Option("--model", help="The policy model's path as the cluster sees it.")
    ],
    hyperparameters: dict[str, Any],
    validation: Annotated[
        str | None, typer.Option(help="A validation bandit dataset (`bandit build --validation`).")
    ] = None,
    gpus_per_node: Annotated[int, typer.Option(help="GPUs per node.")] = 4,
    nodes: Annotated[int, typer.Option(help="Nodes.")] = 1,
) -> None:
    """Write verl parquet, the Cobalt reward function for verl and a launch script with the
    paper's hyperparameters, for GRPO with verl on a Ray cluster."""
    from cobalt.orchestrator.training.verl_export import export_for_verl

    try:
        hyper = TrainerHyperparameters(**hyperparameters)
    except ValueError as exc:
        raise fail(EXIT_USAGE, str(exc).splitlines()[-1]) from exc
    store = store_context()
    with handled():
        written = export_for_verl(
            store.sessions(),
            contexts=contexts,
            out_dir=out,
            model=model,
            hyper=hyper,
            validation=validation,
            gpus_per_node=gpus_per_node,
            nodes=nodes,
        )
    for path in (written.train, written.validation, written.reward, written.script):
        if path is not None:
            typer.echo(f"wrote {path}")
    typer.echo(
        f"next: copy {out} to the cluster, set COBALT_EXECUTOR_URL and COBALT_POLICY_TOKENIZER, "
        f"run {written.script.name}"
    )


_SHOWN_METRICS = ("reward_mean", "pass_rate", "kl_ref", "pg_clipfrac", "step_seconds")


def _status(job: TrainingJobPublic) -> str:
    """The status, marked when the job waits but its trainer stopped reporting."""
    return f"{job.status} (stale)" if job.liveness == JobLiveness.STALE else str(job.status)


def _budget(job: TrainingJobPublic) -> str:
    if job.step_budget is None:
        return f"step {job.step}"
    return f"step {job.step} of its budget of {job.step_budget}"


def _show(job: TrainingJobPublic, *, as_json: bool) -> None:
    if as_json:
        echo_json(job.model_dump(mode="json"))
        return
    typer.echo(
        f"training job {job.id} {job.name!r}: {job.status}, mode {job.mode}, contexts "
        f"{job.contexts}, {_budget(job)}, policy version {job.policy_version}"
    )
    if job.liveness == JobLiveness.STALE:
        moment = job.last_activity_at
        since = f"{moment.astimezone(UTC):%Y-%m-%d %H:%M} UTC" if moment else "?"
        typer.echo(
            f"stale: nothing reported since {since} (COBALT_TRAINING_STALE_S): its trainer has "
            f"probably stopped; `cobalt trainer serve --job {job.id}` continues it, "
            f"`cobalt train stop {job.id}` ends it"
        )
    typer.echo(
        f"groups: {job.groups['ready']} ready, {job.groups['consumed']} consumed, "
        f"{job.groups['stale']} dropped as stale"
    )
    if job.error:
        typer.echo(f"error: {job.error}")
    if job.steps:
        table = Table("step", "policy", *_SHOWN_METRICS)
        for step in job.steps:
            values = [step.metrics.get(key) for key in _SHOWN_METRICS]
            table.add_row(
                str(step.step),
                str(step.policy_version),
                *("-" if v is None else f"{v:.4g}" for v in values),
            )
        print_table(table)
    _show_checkpoints(job)


def _show_checkpoints(job: TrainingJobPublic) -> None:
    """Each reported step's weights, the runs evaluated with them and how to serve them."""
    reported = [c for c in job.checkpoints if c.weights is not None]
    if not reported:
        return
    table = Table("step", "checkpoint", "digest", "runs")
    for checkpoint in reported:
        weights = checkpoint.weights
        assert weights is not None
        where = weights.path or weights.kind
        table.add_row(
            str(checkpoint.step),
            where if checkpoint.present else f"{where} (not on this machine)",
            (weights.digest or "-")[:12],
            ", ".join(str(run) for run in checkpoint.runs) or "-",
        )
    print_table(table)
    newest = next((c for c in reversed(reported) if c.present and c.serve_command), None)
    if newest is not None:
        typer.echo(f"serve step {newest.step}: {newest.serve_command}")
