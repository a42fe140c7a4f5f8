"""The demo, top to bottom: the whole Cobalt loop on one machine with embedded defaults.

1. check the set-up and convert SmolLM2-135M-Instruct (cached in the work dir);
2. start the executor, the orchestrator API (SQLite, no Redis: rollouts run in its
   threads) and vLLM as child processes; import HumanEval meanwhile;
3. baseline: sample turn 0, refine with feedback turns, evaluate on hidden tests;
4. build bandit contexts from that run;
5. train a few GRPO steps; the trainer loads each step's weights into the running vLLM;
6. the same rollouts and evaluation again on the trained policy;
7. the HTML report.

The demo drives the orchestrator's own service functions for the runs (as `cobalt run`
does) and real processes for everything that is a process in deployment. Child processes
are stopped however the demo ends.
"""

from __future__ import annotations

import json
import shutil
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from cobalt.demo.errors import DemoFailed
from cobalt.demo.launch import trainer_process
from cobalt.demo.options import DemoOptions, DemoPaths
from cobalt.demo.problems import import_generated, import_humaneval
from cobalt.demo.progress import DemoProgress, StageBar
from cobalt.demo.report import write_report
from cobalt.demo.results import DemoResult, PhaseResult
from cobalt.demo.stack import (
    Endpoints,
    check_setup,
    policy_model_dir,
    running_services,
    wait_ready,
    without_cobalt_settings,
)
from cobalt.orchestrator.bandit.builder import BuildOptions, build_bandit_dataset
from cobalt.orchestrator.bandit.prompt_length import PromptTokenCounter
from cobalt.orchestrator.runs import service
from cobalt.orchestrator.runs.evaluation import evaluate_run
from cobalt.orchestrator.runs.jobs import finish_run_if_done
from cobalt.orchestrator.settings import OrchestratorSettings
from cobalt.orchestrator.store import repo_bandit, repo_runs
from cobalt.orchestrator.store.db import make_engine, make_sessionmaker, upgrade_database
from cobalt.orchestrator.training.service import create_job, set_job_status
from cobalt.orchestrator.worker.in_process import ThreadCarrier
from cobalt.orchestrator.worker.runtime import runtime
from cobalt.orchestrator.worker.work import work_for_run
from cobalt.shared.clients import ExecutorAddress, ExecutorClient, ExecutorClientSettings
from cobalt.shared.clients.inference import InferenceControlClient
from cobalt.shared.clients.training import TrainingClient
from cobalt.shared.contracts.runs import EvaluationReport, RefineRunRequest, SampleRunRequest
from cobalt.shared.contracts.statuses import RunStatus, TrainingJobStatus
from cobalt.shared.contracts.training import TrainingJobCreate, TrainingJobPublic
from cobalt.shared.errors import CobaltError
from cobalt.shared.reward import TokenizerCounter

__all__ = [
    "RunContext",
    "carry_out",
    "evaluate_on_hidden_tests",
    "executor_settings",
    "policy_version",
    "run_demo",
    "run_trainer",
    "trained_policy_dir",
]

INTERRUPT_JOIN_S = 10.0
"""Longest wait, after Ctrl-C, for the interrupted jobs to hand their trajectories back
(each only writes the reopening of its problem: milliseconds)."""


def carry_out(
    settings: OrchestratorSettings,
    sessions: sessionmaker[Session],
    run_id: int,
    executor_url: str,
    bar: StageBar,
) -> None:
    """Run a run's jobs in threads here while the bar follows the turns written."""
    problem_ids = service.open_problem_ids(sessions, run_id)
    failures: list[tuple[int, BaseException]] = []

    def work() -> None:
        carrier = ThreadCarrier(settings, ExecutorAddress(executor_url))
        failures.extend(carrier.carry(work_for_run(run_id, problem_ids), api_key=None))

    worker = threading.Thread(target=work, name=f"demo-run-{run_id}", daemon=True)
    worker.start()
    try:
        while True:
            alive = worker.is_alive()
            with sessions() as session:
                progress = repo_runs.run_progress(session, run_id=run_id)
            bar.update(completed=progress.turns, note=f"{progress.turns} turns")
            if not alive:
                break
            worker.join(timeout=1.0)
    except KeyboardInterrupt:
        # Ctrl-C: the jobs stop at once and hand their trajectories back; the run is left
        # `interrupted` (resumable), not `running` for ever.
        runtime().interrupt()
        worker.join(timeout=INTERRUPT_JOIN_S)
        service.interrupt_run(sessions, run_id)
        raise
    status = finish_run_if_done(sessions, run_id) or service.run_public(sessions, run_id).status
    if failures or status != RunStatus.FINISHED:
        reason = f": {failures[0][1]}" if failures else ""
        raise DemoFailed(f"run {run_id} ended {status}{reason} (see `cobalt run show {run_id}`)")


def policy_version(endpoints: Endpoints) -> int:
    with InferenceControlClient(endpoints.inference, token=endpoints.control_token) as control:
        return control.status().version


def executor_settings(ctx: RunContext) -> ExecutorClientSettings:
    """The demo's executor (started without a token), whose maximums a run's limits obey."""
    return ExecutorClientSettings(url=ctx.endpoints.executor, auth_token=None)


def _roll_out(
    label: str,
    options: DemoOptions,
    ctx: RunContext,
    progress: DemoProgress,
    *,
    dataset: str,
    problems: int,
) -> PhaseResult:
    """Sample turn 0, refine it with feedback turns, evaluate every turn on hidden tests."""
    version = policy_version(ctx.endpoints)
    trajectories = problems * options.samples
    sample_request = SampleRunRequest(
        dataset=dataset,
        base_url=f"{ctx.endpoints.inference}/v1",
        model=ctx.served,
        n=options.samples,
        limit=problems,
        max_tokens=options.max_tokens,
        temperature=options.temperature,
        # scored as the training job trains (`_train`): one model, one set of rules
        reward_format=options.reward_format,
        **options.run_sampling(options.seed),
    )
    with progress.stage(f"{label}: sampling turn 0", total=trajectories) as bar:
        sample_run = service.create_sample_run(
            ctx.sessions, sample_request, executor=executor_settings(ctx)
        )
        carry_out(ctx.settings, ctx.sessions, sample_run, ctx.endpoints.executor, bar)
    # Decoding settings left out: a refine run takes its sample run's.
    refine_request = RefineRunRequest(from_run=sample_run, turns=options.turns)
    total = trajectories * (options.turns + 1)
    with progress.stage(f"{label}: {options.turns} feedback turns", total=total) as bar:
        refine_run = service.create_refine_run(
            ctx.sessions, refine_request, executor=executor_settings(ctx)
        )
        carry_out(ctx.settings, ctx.sessions, refine_run, ctx.endpoints.executor, bar)
    report = evaluate_on_hidden_tests(
        ctx, refine_run, progress, f"{label}: evaluating on hidden tests"
    )
    return PhaseResult(label, sample_run, refine_run, version, report)


def evaluate_on_hidden_tests(
    ctx: RunContext, run_id: int, progress: DemoProgress, stage: str
) -> EvaluationReport:
    """Judge run `run_id`'s turns on the hidden tests (stored with the run) and report
    Pass@1 per turn, shown as the progress stage `stage`."""
    with (
        progress.stage(stage) as bar,
        ExecutorClient(base_url=ctx.endpoints.executor) as executor,
    ):
        report = evaluate_run(
            ctx.sessions,
            run_id,
            executor,
            ks=(1,),
            on_progress=lambda done, total: bar.update(completed=done, total=total),
            reward_tokens=ctx.reward_tokens,
            tokenizer=str(ctx.model_dir),
        )
        bar.update(note="Pass@1 " + " ".join(f"{p:.2f}" for p in report.pass_at_1 or []))
    return report


@dataclass
class RunContext:
    settings: OrchestratorSettings
    sessions: sessionmaker[Session]
    endpoints: Endpoints
    served: str
    model_dir: Path
    reward_tokens: TokenizerCounter
    paths: DemoPaths
    dataset: str
    eval_dataset: str = ""
    """Generated data: the held-out instances evaluated before and after; else unused
    (HumanEval is evaluated on the trained problems)."""


def _baseline_key(options: DemoOptions, paths: DemoPaths, model_dir: Path, served: str) -> str:
    """What makes two baselines the same experiment (then a re-run reuses the first); the
    store is part of it, as the runs' ids only mean something there."""
    return json.dumps(
        [
            str(model_dir.resolve()),
            served,
            options.problems,
            options.samples,
            options.turns,
            options.max_tokens,
            options.temperature,
            paths.database_url,
            *([options.data, options.seed, options.eval_problems] if options.cheap_samples else []),
            *(["paired-sampling", options.seed] if options.paired_sampling else []),
        ],
    )


def _without_password(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


def _reusable_baseline(
    paths: DemoPaths, key: str, ctx: RunContext, entry: str = "baseline"
) -> PhaseResult | None:
    if not paths.state.is_file():
        return None
    saved = json.loads(paths.state.read_text(encoding="utf-8")).get(entry) or {}
    if saved.get("key") != key:
        return None
    try:
        if service.run_public(ctx.sessions, int(saved["refine_run"])).status != RunStatus.FINISHED:
            return None
    except (CobaltError, KeyError, ValueError, SQLAlchemyError):
        return None  # a removed run or a state file of another database: run it again
    return PhaseResult(
        "before",
        int(saved["sample_run"]),
        int(saved["refine_run"]),
        int(saved["policy_version"]),
        EvaluationReport.model_validate(saved["report"]),
        reused=True,
    )


def _save_baseline(paths: DemoPaths, key: str, phase: PhaseResult, entry: str = "baseline") -> None:
    state = json.loads(paths.state.read_text(encoding="utf-8")) if paths.state.is_file() else {}
    state |= {
        entry: {
            "key": key,
            "sample_run": phase.sample_run,
            "refine_run": phase.refine_run,
            "policy_version": phase.policy_version,
            "report": phase.report.model_dump(mode="json"),
        }
    }
    paths.state.write_text(json.dumps(state, indent=2), encoding="utf-8")


def _build_contexts(
    options: DemoOptions, ctx: RunContext, run_id: int, bar: StageBar
) -> tuple[str, int, dict[str, Any]]:
    """The bandit dataset of the baseline run; a re-run reuses it (the build is determined
    by the run and the options, and earlier training jobs still point at it)."""
    name = f"demo-run-{run_id}-{options.max_context_tokens}"
    with ctx.sessions() as session:
        for dataset, count in repo_bandit.list_bandit_datasets(session):
            if dataset.name == name:
                bar.update(note=f"{count} contexts (built by an earlier demo)")
                return name, count, dict(dataset.counts)
    counter = PromptTokenCounter.from_dir(ctx.model_dir)
    built = build_bandit_dataset(
        ctx.sessions,
        run_id=run_id,
        name=name,
        # Contexts longer than this are dropped, never truncated; DemoOptions keeps it plus
        # the response within the served context length.
        options=BuildOptions(
            tokenizer=str(ctx.model_dir), max_prompt_tokens=options.max_context_tokens
        ),
        count_tokens=counter.count,
    )
    if built.contexts == 0:
        raise DemoFailed(
            f"the bandit builder kept no context from run {run_id} (every problem solved by "
            "every turn-0 sample, or every prompt over --max-context-tokens); try other "
            "--problems or a larger --max-context-tokens"
        )
    bar.update(note=f"{built.contexts} contexts")
    return name, built.contexts, built.counts


def _train(
    options: DemoOptions, ctx: RunContext, contexts: str, available: int, progress: DemoProgress
) -> TrainingJobPublic:
    """A training job of `options.steps` steps over the contexts (its budget: it ends
    `finished`), and its trainer process."""
    per_step = min(options.contexts_per_step, available)
    trainer_params = {
        "n_samples": options.group_size,
        "contexts_per_step": per_step,
        # Mini-batches must split a step evenly; 2 updates (the paper's) where they can.
        "updates_per_step": 2 if per_step % 2 == 0 else 1,
        "max_response_tokens": options.max_tokens,
        "lr": options.lr,
        "kl_coef": options.kl_coef,
    }
    request = TrainingJobCreate(
        name=f"demo-{datetime.now(UTC):%Y%m%d-%H%M%S}",
        contexts=contexts,
        model=str(ctx.model_dir.resolve()),
        params={
            "base_url": f"{ctx.endpoints.inference}/v1",
            "served_model": ctx.served,
            "temperature": options.temperature,
            "trainer": trainer_params,
            "reward_format": options.reward_format.value,
            # the job's budget: its last step's report finishes it
            "max_steps": options.steps,
            # answers end at their code as in the runs (the template comes with the contexts)
            **({"stop_at_code_end": True} if options.cheap_samples else {}),
        },
    )
    job_id = create_job(ctx.sessions, request)
    # Earlier demos' checkpoints (~2 GB each: weights and AdamW state) only serve to resume
    # jobs the demo never resumes; without this every re-run would add gigabytes.
    for earlier in ctx.paths.checkpoints.glob("job-*"):
        shutil.rmtree(earlier, ignore_errors=True)
    return run_trainer(ctx, job_id, options.steps, progress, label="training")


def trainer_environment(ctx: RunContext, steps: int) -> dict[str, str]:
    """The trainer process's environment: this stack's endpoints and checkpoints, and none
    of the user's own COBALT_* settings."""
    env = without_cobalt_settings()
    env.update(
        COBALT_TRAINER_ORCHESTRATOR_URL=ctx.endpoints.orchestrator,
        COBALT_TRAINER_INFERENCE_URL=ctx.endpoints.inference,
        COBALT_TRAINER_CHECKPOINT_DIR=str(ctx.paths.checkpoints.resolve()),
        # The resume state (weights and AdamW moments, 1.6 GB for SmolLM2) once, at the
        # end: neither the demo nor the experiment resumes a job mid-way (an unfinished
        # arm trains again from the base), and writing it after every step cost 3-8 s of
        # a 2-core machine's time per step beside the next step's sampling.
        COBALT_TRAINER_SAVE_EVERY=str(max(steps, 1)),
        # glibc's own mmap threshold instead of the trainer's fixed 128 KiB: a SmolLM2 step
        # of the experiment's shape 1.26x faster for 0.7 GB more peak memory
        # (docs/benchmarks.md, "The trainer's malloc threshold in the demo and the
        # experiment"); the fixed threshold keeps a long job's memory flat, which a
        # 16-step arm on a 2-core machine with room to spare does not need.
        COBALT_TRAINER_MALLOC_MMAP_THRESHOLD="0",
    )
    if ctx.endpoints.control_token:
        env["COBALT_TRAINER_INFERENCE_TOKEN"] = ctx.endpoints.control_token
    return env


def run_trainer(
    ctx: RunContext, job_id: int, steps: int, progress: DemoProgress, *, label: str
) -> TrainingJobPublic:
    """Run the trainer process of job `job_id` (budget: `steps` steps) until the job is
    finished; its log is logs/trainer-<job>.log.

    Raises:
        DemoFailed: the job failed, or the trainer stopped before its budget was spent.
    """
    env = trainer_environment(ctx, steps)
    trainer = trainer_process(
        job_id=job_id, log_dir=ctx.paths.logs, env=env, log_name=f"trainer-{job_id}.log"
    )
    with TrainingClient(ctx.endpoints.orchestrator) as api:
        with progress.stage(f"{label}: {steps} GRPO steps", total=steps) as bar:
            trainer.start()
            try:
                while trainer.is_running():
                    job = api.job(job_id)
                    bar.update(completed=job.step, note=_step_note(job))
                    if job.status == TrainingJobStatus.FAILED:
                        raise DemoFailed(f"training job {job_id} failed: {job.error}")
                    time.sleep(1.0)
            except KeyboardInterrupt:
                # Its trainer is stopped below: the job says so (`stopped`, resumable with
                # `cobalt train resume`) rather than `running` with nobody training it.
                trainer.stop()
                set_job_status(ctx.sessions, job_id, TrainingJobStatus.STOPPED)
                raise
            finally:
                trainer.stop()
            job = api.job(job_id)
            bar.update(completed=job.step, note=_step_note(job))
        if trainer.returncode == -signal.SIGKILL:
            raise trainer.failure(
                "was killed (SIGKILL: out of memory?); try smaller --contexts-per-step, "
                "--group-size or --max-tokens"
            )
        if trainer.returncode != 0 or job.status != TrainingJobStatus.FINISHED:
            raise trainer.failure(
                f"stopped after {job.step} of {steps} steps (exit {trainer.returncode}"
                f"{'; ' + job.error if job.error else ''})"
            )
    return job


def trained_policy_dir(checkpoints: Path, job_id: int) -> Path | None:
    """The newest policy directory the trainer wrote for the job, or None.

    The trainer's layout (cobalt.trainer.checkpoint): <root>/job-<id>/step-<k>/policy/,
    complete once renamed there, with cobalt-policy.json naming its step and version.
    """
    best: tuple[int, Path] | None = None
    for marker in checkpoints.glob(f"job-{job_id}/step-*/policy/cobalt-policy.json"):
        try:
            step = int(json.loads(marker.read_text(encoding="utf-8"))["step"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if best is None or step > best[0]:
            best = (step, marker.parent)
    return best[1].resolve() if best else None


def _step_note(job: TrainingJobPublic) -> str:
    if not job.steps:
        return f"job {job.id}: rolling out and training step 1"
    metrics = job.steps[-1].metrics
    reward = metrics.get("reward_mean", metrics.get("reward"))
    shown = f", reward {reward:+.3f}" if reward is not None else ""
    return f"job {job.id}: policy v{job.policy_version}{shown}"


def run_demo(
    options: DemoOptions,
    store_url: str,
    progress: DemoProgress,
    on_done: Callable[[DemoResult], None] | None = None,
) -> DemoResult:
    """The whole loop and its report, in the store `store_url`
    (`cobalt.demo.store.choose_store`); `on_done` runs while the services are still up (the
    CLI prints the summary there, and keeps the web UI open if asked).

    Raises:
        DemoFailed: a step failed; the message says which and what to do.
        CobaltError: a service answered with an error (the caller prints it).
    """
    paths = DemoPaths(options.work_dir.expanduser().resolve(), database_url=store_url)
    if options.fresh:
        paths.clear()
    paths.root.mkdir(parents=True, exist_ok=True)
    check_setup(options)
    model_dir = policy_model_dir(options.model, paths, progress)
    served = options.served_model or model_dir.name
    with progress.stage("opening the database") as bar:
        upgrade_database(paths.database_url)
        engine = make_engine(paths.database_url)
        bar.update(note=_without_password(paths.database_url))
    try:
        sessions = make_sessionmaker(engine)
        with running_services(options, paths, model_dir, served) as (endpoints, children):
            eval_dataset = ""
            if options.data == "generated":
                with progress.stage("generating problems") as bar:
                    dataset, eval_dataset = import_generated(sessions, options, paths, bar)
            else:
                with progress.stage("importing HumanEval (bundled)") as bar:
                    dataset = import_humaneval(sessions, options, paths, bar)
            wait_ready(children, progress)
            ctx = RunContext(
                settings=OrchestratorSettings(
                    database_url=paths.database_url,
                    redis_url=None,
                    # Problems rolled out at once: on 2 cores vLLM's throughput still grows
                    # up to 64 in flight (docs/benchmarks.md, "vLLM on 2 vCPUs").
                    local_concurrency=max(1, min(max(options.problems, options.eval_problems), 64)),
                ),
                sessions=sessions,
                endpoints=endpoints,
                served=served,
                model_dir=model_dir,
                dataset=dataset,
                eval_dataset=eval_dataset,
                reward_tokens=TokenizerCounter.from_path(model_dir),
                paths=paths,
            )
            result = _loop(options, ctx, progress)
            with progress.stage("writing the report") as bar:
                result.timings = dict(progress.timings)
                result.report_path = write_report(result, paths.report)
                bar.update(note=str(result.report_path))
            if on_done is not None:
                on_done(result)
            return result
    finally:
        engine.dispose()


def _baseline(
    label: str,
    entry: str,
    options: DemoOptions,
    ctx: RunContext,
    progress: DemoProgress,
    *,
    dataset: str,
    problems: int,
) -> PhaseResult:
    """The base policy's roll-out of `dataset`, or an earlier demo's of the same key."""
    key = _baseline_key(options, ctx.paths, ctx.model_dir, ctx.served)
    phase = _reusable_baseline(ctx.paths, key, ctx, entry)
    if phase is not None and phase.policy_version == policy_version(ctx.endpoints):
        progress.say(f"reusing the {label} run of an earlier demo (run {phase.refine_run})")
        return phase
    phase = _roll_out(label, options, ctx, progress, dataset=dataset, problems=problems)
    _save_baseline(ctx.paths, key, phase, entry)
    return phase


def _loop(options: DemoOptions, ctx: RunContext, progress: DemoProgress) -> DemoResult:
    """Steps 3-6: baseline, contexts, training, the trained policy's turn. With generated
    data the contexts come from the training instances and the before/after comparison is
    made on the held-out ones, which training never saw."""
    trained_on = _baseline(
        "before", "baseline", options, ctx, progress, dataset=ctx.dataset, problems=options.problems
    )
    before, evaluated = trained_on, (ctx.dataset, options.problems)
    if ctx.eval_dataset:
        evaluated = (ctx.eval_dataset, options.eval_problems)
        before = _baseline(
            "before (held-out)",
            "baseline_eval",
            options,
            ctx,
            progress,
            dataset=ctx.eval_dataset,
            problems=options.eval_problems,
        )
    with progress.stage("building bandit contexts") as bar:
        name, count, counts = _build_contexts(options, ctx, trained_on.refine_run, bar)
    training = _train(options, ctx, name, count, progress)
    label = "after (held-out)" if ctx.eval_dataset else "after"
    after = _roll_out(label, options, ctx, progress, dataset=evaluated[0], problems=evaluated[1])
    if after.policy_version <= before.policy_version:
        raise DemoFailed(
            f"the inference server still serves policy version {after.policy_version} after "
            "training; the weight sync did not happen (see the trainer log)"
        )
    from cobalt.orchestrator.runs.comparison import compare_runs

    comparison = compare_runs(ctx.sessions, before.refine_run, after.refine_run)
    outcomes = {}
    if ctx.eval_dataset:
        from cobalt.demo.experiment.outcomes import turn_outcomes

        with progress.stage("failure kinds of the first answers") as bar:
            for phase in (before, after):
                outcomes[phase.label] = turn_outcomes(
                    ctx.sessions, phase.refine_run, ctx.endpoints.executor, compare="cobalt"
                )
            bar.update(note=f"{outcomes[after.label]['answers']} answers after training")
    return DemoResult(
        change=comparison.difference,
        change_interval=comparison.difference_interval,
        compared_problems=comparison.paired_problems,
        options=options,
        model_dir=ctx.model_dir,
        served_model=ctx.served,
        before=before,
        after=after,
        bandit_name=name,
        bandit_contexts=count,
        bandit_counts=counts,
        training=training,
        ui_url=ctx.endpoints.orchestrator,
        database_url=ctx.paths.database_url,
        dataset=ctx.dataset,
        eval_dataset=ctx.eval_dataset,
        trained_on=trained_on,
        outcomes=outcomes,
        trained_model=trained_policy_dir(ctx.paths.checkpoints, training.id),
    )
