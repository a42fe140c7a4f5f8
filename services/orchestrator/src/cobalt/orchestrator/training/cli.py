"""`cobalt train start|list|show|stop|resume`: training jobs in the store.

A job only describes the training; its trainer process (`cobalt trainer serve --job ID`)
drives it: schedules rollout rounds, claims steps, trains and publishes weights.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import BaseModel
from rich.console import Console
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
from cobalt.shared import defaults
from cobalt.shared.contracts.training import JobLiveness, TrainerHyperparameters, TrainingMode
from cobalt.shared.contracts.training_params import (
    CommonTrainingParams,
    EpisodeSettings,
    FormatRules,
    VerpoSettings,
)
from cobalt.shared.reward_format import RewardFormat

# The training service, the verl export and the store are imported by the commands that
# use them, so that `cobalt train --help` loads none of SQLAlchemy, Alembic or pyarrow.
if TYPE_CHECKING:
    from cobalt.shared.contracts import TrainingJobStatus
    from cobalt.shared.contracts.training import TrainingJobPublic

__all__ = ["train_app"]


def _default(model: type[BaseModel], name: str, note: str = "") -> str:
    """A setting's default as `--help` shows it, "[value]" (escaped: rich would read it as
    markup), read from its model, where it is written once."""
    value = model.model_fields[name].get_default(call_default_factory=True)
    shown = ("on" if value else "off") if isinstance(value, bool) else str(value)
    return rf"\[{shown}{': ' + note if note else ''}]"


def _trainer(name: str, note: str = "") -> str:
    return _default(TrainerHyperparameters, name, note)


def _rollouts(name: str, note: str = "") -> str:
    return _default(CommonTrainingParams, name, note)


def _episodes(name: str) -> str:
    return _default(EpisodeSettings, name)


train_app = typer.Typer(
    help=(
        "GRPO training jobs on a bandit dataset: start one, then run its trainer "
        "(`cobalt trainer serve --job ID`); list, show (metrics per step), stop, resume."
    ),
    no_args_is_help=True,
)


@train_app.command("start")
def start(
    contexts: Annotated[str, typer.Option("--contexts", help="The bandit dataset's name.")],
    model: Annotated[
        Path, typer.Option("--model", help="The policy model's directory (trainer, reward).")
    ],
    name: Annotated[str | None, typer.Option(help="Job name (default: CONTEXTS-<time>).")] = None,
    mode: Annotated[
        TrainingMode,
        typer.Option(
            help="cobalt: every context; single-turn: turn-0 only; multi-turn: online "
            "episodes from the turn-0 contexts, rewarded by their last turn; verpo: the same "
            "episodes, each turn rewarded by VeRPO (difficulty-weighted partial test passes)."
        ),
    ] = TrainingMode.COBALT,
    base_url: Annotated[
        str | None,
        typer.Option(
            envvar="COBALT_POLICY_BASE_URL",
            help=f"The inference service's /v1 URL {_rollouts('base_url')}.",
        ),
    ] = None,
    served_model: Annotated[
        str | None,
        typer.Option(
            envvar="COBALT_POLICY_MODEL", help=f"The name it serves {_rollouts('served_model')}."
        ),
    ] = None,
    max_steps: Annotated[
        int | None,
        typer.Option(
            help="The job's step budget: it is finished after this many steps (with "
            "--epochs, whichever is spent first) [none: until stopped]."
        ),
    ] = None,
    epochs: Annotated[
        int | None,
        typer.Option(
            help="The job's budget in epochs: each context its mode trains on (each problem "
            "for multi-turn and verpo) visited this many times [none: until stopped]."
        ),
    ] = None,
    n_samples: Annotated[
        int | None, typer.Option(help=f"Group size n {_trainer('n_samples')}.")
    ] = None,
    contexts_per_step: Annotated[
        int | None, typer.Option(help=f"Groups per step {_trainer('contexts_per_step')}.")
    ] = None,
    updates_per_step: Annotated[
        int | None,
        typer.Option(help=f"Optimizer updates per step {_trainer('updates_per_step')}."),
    ] = None,
    lr: Annotated[float | None, typer.Option(help=f"AdamW learning rate {_trainer('lr')}.")] = None,
    kl_coef: Annotated[
        float | None, typer.Option(help=f"k2 KL weight {_trainer('kl_coef')}.")
    ] = None,
    max_response_tokens: Annotated[
        int | None,
        typer.Option(help=f"Longest sampled response {_trainer('max_response_tokens')}."),
    ] = None,
    max_prompt_tokens: Annotated[
        int | None,
        typer.Option(help=f"Longest prompt (context) {_trainer('max_prompt_tokens')}."),
    ] = None,
    micro_batch_tokens: Annotated[
        int | None,
        typer.Option(
            help="Most prompt + response tokens in one forward/backward; gradients "
            "accumulate over micro-batches [max prompt + max response tokens]."
        ),
    ] = None,
    share_prompts: Annotated[
        bool | None,
        typer.Option(
            "--share-prompts/--no-share-prompts",
            help="Score a group's responses in one forward of their prompt (packed, no "
            "padding; the same gradient as one row per response) "
            f"{_trainer('share_prompts')}.",
        ),
    ] = None,
    compute_dtype: Annotated[
        str | None,
        typer.Option(
            help="auto, float32 or bfloat16 (weights stay float32) "
            f"{_trainer('compute_dtype', 'bf16 on GPU and on a CPU with native bf16')}."
        ),
    ] = None,
    activation_checkpointing: Annotated[
        bool | None,
        typer.Option(
            "--activation-checkpointing/--no-activation-checkpointing",
            help="Recompute decoder layers in backward [on on GPUs, off on the CPU].",
        ),
    ] = None,
    lora_rank: Annotated[
        int | None,
        typer.Option(
            help="Train a LoRA adapter of this rank over the frozen model (peft) instead of "
            "every weight; each step syncs the adapter [off: full fine-tuning]."
        ),
    ] = None,
    lora_alpha: Annotated[
        float | None, typer.Option(help="LoRA scaling numerator alpha [2 x rank].")
    ] = None,
    lora_targets: Annotated[
        list[str] | None,
        typer.Option(
            help="Module names the adapter wraps, repeatable (q_proj, v_proj, ...) "
            "[all-linear: every linear layer but the output head]."
        ),
    ] = None,
    recompute_old_log_probs: Annotated[
        bool | None,
        typer.Option(
            "--recompute-old-log-probs/--no-recompute-old-log-probs",
            help="The ratio's denominator from the trainer's weights, not the sampler's; "
            "reports the sampler/trainer mismatch "
            f"{_trainer('recompute_old_log_probs', 'the paper')}.",
        ),
    ] = None,
    tis_cap: Annotated[
        float | None,
        typer.Option(
            help="Truncated importance sampling: each token's loss times "
            "min(pi_old / pi_sampler, this); needs --recompute-old-log-probs [off]."
        ),
    ] = None,
    mis_threshold: Annotated[
        float | None,
        typer.Option(
            help="Masked importance sampling: tokens with pi_old / pi_sampler outside "
            "[1/this, this] leave the loss; needs --recompute-old-log-probs [off]."
        ),
    ] = None,
    max_staleness: Annotated[
        int | None,
        typer.Option(
            help="Policy-version lag a sample may have "
            f"{_rollouts('max_staleness', 'synchronous')}."
        ),
    ] = None,
    temperature: Annotated[
        float | None, typer.Option(help=f"Sampling temperature {_rollouts('temperature')}.")
    ] = None,
    top_p: Annotated[
        float | None, typer.Option(help=f"Sampling top_p {_rollouts('top_p')}.")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Sampling seed.")] = None,
    reward_format: Annotated[
        RewardFormat | None,
        typer.Option(
            help="reasoning: the paper's format rules (one </think>); instruct: for models "
            f"without a thinking block {_default(FormatRules, 'reward_format')}."
        ),
    ] = None,
    turns: Annotated[
        int | None,
        typer.Option(
            help=f"multi-turn, verpo: turns per episode, turn 0 included {_episodes('turns')}."
        ),
    ] = None,
    stop_on_pass: Annotated[
        bool | None,
        typer.Option(
            "--stop-on-pass/--no-stop-on-pass",
            help="multi-turn, verpo: end an episode once its program passes every public "
            f"test {_episodes('stop_on_pass')}.",
        ),
    ] = None,
    template: Annotated[
        str | None,
        typer.Option(help="multi-turn, verpo: feedback template [the contexts' source run's]."),
    ] = None,
    verpo_outcome_weight: Annotated[
        float | None,
        typer.Option(
            help="verpo: the all-tests outcome's share of a turn's reward; the "
            f"difficulty-weighted dense reward has the rest "
            f"{_default(VerpoSettings, 'verpo_outcome_weight')}."
        ),
    ] = None,
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
    """Create a pending training job (defaults: the paper's settings)."""
    from cobalt.orchestrator.training import service
    from cobalt.shared.contracts.training import TrainingJobCreate

    trainer = {
        "n_samples": n_samples,
        "contexts_per_step": contexts_per_step,
        "updates_per_step": updates_per_step,
        "lr": lr,
        "kl_coef": kl_coef,
        "max_response_tokens": max_response_tokens,
        "max_prompt_tokens": max_prompt_tokens,
        "micro_batch_tokens": micro_batch_tokens,
        "share_prompts": share_prompts,
        "compute_dtype": compute_dtype,
        "activation_checkpointing": activation_checkpointing,
        "lora_rank": lora_rank,
        "lora_alpha": lora_alpha,
        "lora_targets": lora_targets or None,
        "recompute_old_log_probs": recompute_old_log_probs,
        "tis_cap": tis_cap,
        "mis_threshold": mis_threshold,
    }
    rollouts: dict[str, Any] = {
        "base_url": base_url,
        "served_model": served_model,
        "max_staleness": max_staleness,
        "max_steps": max_steps,
        "epochs": epochs,
        "temperature": temperature,
        "top_p": top_p,
        "seed": seed,
        "reward_format": reward_format,
        "turns": turns,
        "stop_on_pass": stop_on_pass,
        "template": template,
        "verpo_outcome_weight": verpo_outcome_weight,
        "report_to": report_to,
        "trainer": {k: v for k, v in trainer.items() if v is not None},
    }
    rollouts.update(sampling_settings_set(sampling_set))
    request = TrainingJobCreate(
        name=name or f"{contexts}-{datetime.now(UTC):%Y%m%d-%H%M%S}",
        contexts=contexts,
        model=str(model.expanduser().resolve()),
        mode=mode,
        params={k: v for k, v in rollouts.items() if v is not None},
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
    Console().print(table)


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


@train_app.command("export-verl")
def export_verl(
    contexts: Annotated[str, typer.Option("--contexts", help="The bandit dataset to train on.")],
    out: Annotated[Path, typer.Option("--out", help="Directory to write into.")],
    model: Annotated[
        str, typer.Option("--model", help="The policy model's path as the cluster sees it.")
    ],
    validation: Annotated[
        str | None, typer.Option(help="A validation bandit dataset (`bandit build --validation`).")
    ] = None,
    n_samples: Annotated[int, typer.Option(help="Group size n.")] = defaults.SAMPLES_PER_PROBLEM,
    contexts_per_step: Annotated[
        int, typer.Option(help="Contexts per step.")
    ] = defaults.CONTEXTS_PER_STEP,
    updates_per_step: Annotated[int, typer.Option(help="Optimizer updates per step.")] = 2,
    lr: Annotated[float, typer.Option(help="Learning rate.")] = defaults.LEARNING_RATE,
    kl_coef: Annotated[float, typer.Option(help="k2 KL weight.")] = 1e-4,
    max_response_tokens: Annotated[
        int, typer.Option(help="Longest response.")
    ] = defaults.MAX_RESPONSE_TOKENS,
    gpus_per_node: Annotated[int, typer.Option(help="GPUs per node.")] = 4,
    nodes: Annotated[int, typer.Option(help="Nodes.")] = 1,
) -> None:
    """Write verl parquet, the Cobalt reward function for verl and a launch script with the
    paper's hyperparameters, for GRPO with verl on a Ray cluster."""
    from cobalt.orchestrator.training.verl_export import export_for_verl
    from cobalt.shared.contracts.training import TrainerHyperparameters

    try:
        hyper = TrainerHyperparameters(
            n_samples=n_samples,
            contexts_per_step=contexts_per_step,
            updates_per_step=updates_per_step,
            lr=lr,
            kl_coef=kl_coef,
            max_response_tokens=max_response_tokens,
        )
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
        Console().print(table)


# `cobalt train metrics` (a job's step metrics as CSV or JSON) lives with the other exports.
from cobalt.orchestrator.results.cli import register_train_commands  # noqa: E402

register_train_commands(train_app)
