"""The experiment, top to bottom (docs/experiments.md):

1. the pool of bundled HumanEval problems, split by the seed into training candidates and
   held-out problems, each imported as a dataset;
2. screening: the base model on the candidates; the training problems are those it
   solved sometimes but not always (the held-out problems are never looked at to choose);
3. the base arm: a fresh run on the training problems (and, generated data, the
   validation instances), evaluated on hidden tests; its training run is also Cobalt's
   offline data, cut into bandit contexts;
4. each trained arm (the shuffled-reward control among them), from the base weights,
   with the same number of sampled responses; then its runs on the training problems
   and the validation instances, evaluated the same way;
5. the held-out problems, read once at the end: every arm's weights, one run each
   (nothing is chosen after this: choices are made on training curves and validation);
6. the report (markdown and PNGs) from what the store holds.

One vLLM serves every arm: the base weights are loaded back before an arm trains, and an
arm's last weights before its runs. Every run and job is recorded under a key derived from
its arm's config (the job's name in the store; the runs in state.json, checked against the
store), so a re-run after an interruption reuses what was finished.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from cobalt.demo.errors import DemoFailed
from cobalt.demo.experiment import generated
from cobalt.demo.experiment.plan import (
    Arm,
    ExperimentOptions,
    Split,
    arms_of,
    pool_rows,
    select_training_problems,
    split_pool,
)
from cobalt.demo.options import DemoOptions, DemoPaths
from cobalt.demo.pipeline import (
    RunContext,
    carry_out,
    evaluate_on_hidden_tests,
    executor_settings,
    run_trainer,
    trained_policy_dir,
)
from cobalt.demo.progress import DemoProgress
from cobalt.demo.stack import check_setup, policy_model_dir, running_services, wait_ready

__all__ = ["ArmResult", "ExperimentResult", "run_experiment"]

CONTEXTS_PER_PROBLEM_HINT = "try a larger --pool or --no-select"


@dataclass
class ArmResult:
    """One arm's job (none for base) and its evaluated runs, by split."""

    arm: Arm
    key: str
    job: int | None = None
    runs: dict[str, int] = field(default_factory=dict)
    """"train", "validation" (generated data) and "held_out": the run evaluated there."""
    weights: Path | None = None
    """The policy its runs sample from (the base model's directory for base)."""


@dataclass
class ExperimentResult:
    options: ExperimentOptions
    database_url: str
    model_dir: Path
    split: Split
    screening_run: int | None
    """None: the templates were read from the recorded screening (`recorded_screening`)."""
    screening_rates: dict[str, float]
    training_problems: list[str]
    dropped: dict[str, str]
    datasets: dict[str, str]
    bandit_dataset: str
    bandit_contexts: int
    arms: list[ArmResult]
    timings: dict[str, float] = field(default_factory=dict)
    report_path: Path | None = None
    outcomes: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Arm -> split -> its run's turn-0 answers by outcome (`outcomes.turn_outcomes`)."""


class _State:
    """Run ids by key (state.json in the work dir); a key whose run the store no longer has
    finished and evaluated is run again."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.runs: dict[str, int] = {}
        if path.is_file():
            try:
                self.runs = {k: int(v) for k, v in json.loads(path.read_text()).items()}
            except (ValueError, AttributeError):
                self.runs = {}

    def save(self, key: str, run_id: int) -> None:
        self.runs[key] = run_id
        self.path.write_text(json.dumps(self.runs, indent=2, sort_keys=True), encoding="utf-8")


def _write_dataset(
    rows: list[dict[str, Any]], task_ids: list[str] | tuple[str, ...], out: Path
) -> Path:
    wanted = set(task_ids)
    chosen = sorted(
        (row for row in rows if row["task_id"] in wanted),
        key=lambda row: int(row["task_id"].split("/")[-1]),
    )
    out.write_text("".join(json.dumps(row) + "\n" for row in chosen), encoding="utf-8")
    return out


def _import(ctx: RunContext, name: str, rows: list[dict[str, Any]], ids: Any) -> str:
    from cobalt.orchestrator.datasets.importing import ImportOptions, import_file

    path = _write_dataset(rows, ids, ctx.paths.root / f"{name}.jsonl")
    report = import_file(
        sessions=ctx.sessions, name=name, fmt="humaneval", path=path, options=ImportOptions()
    )
    if report.inserted + report.unchanged < len(ids):
        raise DemoFailed(f"only {report.inserted + report.unchanged} problems of {name} imported")
    return name


def _serving(ctx: RunContext) -> Path:
    from cobalt.shared.clients.inference import InferenceControlClient

    with InferenceControlClient(ctx.endpoints.inference, token=ctx.endpoints.control_token) as c:
        return Path(c.status().weights_path).resolve()


def _serve(ctx: RunContext, weights: Path) -> None:
    """Have vLLM serve `weights` (the base model or an arm's last policy), as a new version."""
    from cobalt.shared.clients.inference import InferenceControlClient

    if _serving(ctx) == weights.resolve():
        return
    with InferenceControlClient(ctx.endpoints.inference, token=ctx.endpoints.control_token) as c:
        c.load_weights(str(weights.resolve()), version=c.status().version + 1)


def _finished_run(ctx: RunContext, run_id: int | None) -> bool:
    from cobalt.orchestrator.runs import service
    from cobalt.orchestrator.runs.evaluation import stored_report
    from cobalt.shared.contracts.statuses import RunStatus
    from cobalt.shared.errors import CobaltError

    if run_id is None:
        return False
    try:
        if service.run_public(ctx.sessions, run_id).status != RunStatus.FINISHED:
            return False
        return stored_report(ctx.sessions, run_id, ks=(), intervals=False).pass_at_1 is not None
    except (CobaltError, SQLAlchemyError):
        return False


def _evaluated_run(
    ctx: RunContext,
    state: _State,
    key: str,
    *,
    dataset: str,
    samples: int,
    weights: Path,
    options: ExperimentOptions,
    progress: DemoProgress,
    label: str,
    turns: int,
) -> int:
    """The run `key` (turn 0 and `turns` feedback turns of `samples` trajectories per
    problem, by the policy in `weights`), evaluated on hidden tests; reused if done."""
    from cobalt.orchestrator.runs import service
    from cobalt.shared.contracts.runs import SampleRunRequest

    if _finished_run(ctx, state.runs.get(key)):
        progress.say(f"{label}: reusing run {state.runs[key]}")
        return state.runs[key]
    _serve(ctx, weights)
    request = SampleRunRequest(
        dataset=dataset,
        base_url=f"{ctx.endpoints.inference}/v1",
        model=ctx.served,
        n=samples,
        turns=turns,
        max_tokens=options.max_tokens,
        temperature=options.temperature,
        reward_format=options.reward_format,  # the arms' training jobs use the same rules
        **options.run_sampling(options.seed),  # every arm's runs: the same random numbers
    )
    with progress.stage(f"{label}: rollouts") as bar:
        run_id = service.create_sample_run(ctx.sessions, request, executor=executor_settings(ctx))
        carry_out(ctx.settings, ctx.sessions, run_id, ctx.endpoints.executor, bar)
    evaluate_on_hidden_tests(ctx, run_id, progress, f"{label}: hidden tests")
    state.save(key, run_id)
    return run_id


def problem_rates(ctx: RunContext, run_id: int) -> dict[str, float]:
    """Per problem (task id): the share of its samples' turns that pass the hidden tests."""
    from cobalt.orchestrator.runs.comparison import counts_by_external_id

    counted = counts_by_external_id(ctx.sessions, run_id)
    return {
        external_id: sum(c for c, _ in turns) / sum(n for _, n in turns)
        for external_id, turns in counted.items()
    }


def _contexts(ctx: RunContext, run_id: int, options: ExperimentOptions) -> tuple[str, int]:
    """The bandit dataset the paper's builder cuts from the base run on the training
    problems (reused when built before from the same run)."""
    from cobalt.orchestrator.bandit.builder import BuildOptions, build_bandit_dataset
    from cobalt.orchestrator.bandit.prompt_length import PromptTokenCounter
    from cobalt.orchestrator.store import repo_bandit

    name = f"exp-run-{run_id}-{options.max_context_tokens}"
    with ctx.sessions() as session:
        for dataset, count in repo_bandit.list_bandit_datasets(session):
            if dataset.name == name:
                return name, count
    built = build_bandit_dataset(
        ctx.sessions,
        run_id=run_id,
        name=name,
        options=BuildOptions(
            tokenizer=str(ctx.model_dir), max_prompt_tokens=options.max_context_tokens
        ),
        count_tokens=PromptTokenCounter.from_dir(ctx.model_dir).count,
    )
    if built.contexts == 0:
        raise DemoFailed(
            f"the bandit builder kept no context from run {run_id}; {CONTEXTS_PER_PROBLEM_HINT}"
        )
    return name, built.contexts


def _trained_job(
    ctx: RunContext,
    arm: Arm,
    key: str,
    contexts: str,
    progress: DemoProgress,
) -> tuple[int, Path]:
    """The arm's finished job and its last policy directory: reused when a job of its key
    finished and its weights are still there, else trained from the base weights."""
    from cobalt.orchestrator.training.service import create_job, list_jobs
    from cobalt.shared.contracts.statuses import TrainingJobStatus
    from cobalt.shared.contracts.training import TrainingJobCreate

    assert arm.mode is not None
    tries = [j for j in list_jobs(ctx.sessions).items if j.name.split("~")[0] == key]
    for job in tries:
        weights = trained_policy_dir(ctx.paths.checkpoints, job.id)
        if job.status == TrainingJobStatus.FINISHED and weights is not None:
            progress.say(f"{arm.name}: reusing training job {job.id}")
            return job.id, weights
    request = TrainingJobCreate(
        name=key if not tries else f"{key}~{len(tries) + 1}",
        mode=arm.mode,
        contexts=contexts,
        model=str(ctx.model_dir.resolve()),
        params={
            **arm.params,
            "base_url": f"{ctx.endpoints.inference}/v1",
            "served_model": ctx.served,
        },
    )
    job_id = create_job(ctx.sessions, request)
    _serve(ctx, ctx.model_dir)  # every arm starts from the base weights
    run_trainer(ctx, job_id, arm.steps, progress, label=f"{arm.name}: training")
    weights = trained_policy_dir(ctx.paths.checkpoints, job_id)
    if weights is None:
        raise DemoFailed(f"training job {job_id} left no policy directory")
    return job_id, weights


def _stack_options(options: ExperimentOptions) -> DemoOptions:
    return DemoOptions(
        max_tokens=options.max_tokens,
        max_context_tokens=options.max_context_tokens,
        max_model_len=options.max_model_len,
        work_dir=options.work_dir,
        inference_url=options.inference_url,
        model=options.model,
        served_model=options.served_model,
        ui_port=options.ui_port,
    )


def run_experiment(
    options: ExperimentOptions, store_url: str, progress: DemoProgress
) -> ExperimentResult:
    """Every arm, its evaluation, and the report, in the store `store_url`
    (`cobalt.demo.store.choose_store`); see the module's docstring.

    Raises:
        DemoFailed: a step failed; the message says which and what to do.
        CobaltError: a service answered with an error.
    """
    from cobalt.demo.experiment.report import write_report
    from cobalt.orchestrator.settings import OrchestratorSettings
    from cobalt.orchestrator.store.db import make_engine, make_sessionmaker, upgrade_database
    from cobalt.shared.reward import TokenizerCounter

    paths = DemoPaths(options.work_dir.expanduser().resolve(), database_url=store_url)
    paths.root.mkdir(parents=True, exist_ok=True)
    stack = _stack_options(options)
    check_setup(stack)
    model_dir = policy_model_dir(options.model, paths, progress)
    served = options.served_model or model_dir.name
    generated = options.data == "generated"
    rows = [] if generated else pool_rows(options.pool)
    split = Split((), ()) if generated else split_pool([r["task_id"] for r in rows], options.seed)
    upgrade_database(paths.database_url)
    engine = make_engine(paths.database_url)
    try:
        sessions = make_sessionmaker(engine)
        with running_services(stack, paths, model_dir, served) as (endpoints, children):
            wait_ready(children, progress)
            ctx = RunContext(
                settings=OrchestratorSettings(
                    database_url=paths.database_url, redis_url=None, local_concurrency=64
                ),
                sessions=sessions,
                endpoints=endpoints,
                served=served,
                model_dir=model_dir,
                dataset="",
                reward_tokens=TokenizerCounter.from_path(model_dir),
                paths=paths,
            )
            result = _run_arms(options, ctx, rows, split, progress)
            with progress.stage("turn-0 answers by outcome") as bar:
                result.outcomes = _outcomes(ctx, result, options)
            with progress.stage("writing the report") as bar:
                result.timings = dict(progress.timings)
                result.report_path = write_report(result, sessions, paths.root / "report.md")
                bar.update(note=str(result.report_path))
            return result
    finally:
        engine.dispose()


def _run_arms(
    options: ExperimentOptions,
    ctx: RunContext,
    rows: list[dict[str, Any]],
    split: Split,
    progress: DemoProgress,
) -> ExperimentResult:
    state = _State(ctx.paths.root / "state.json")
    arms = arms_of(options)
    base = next(arm for arm in arms if arm.name == "base")
    base_key = base.key(options)
    prefix = f"exp-s{options.seed}-p{options.pool}"
    screening: int | None = None
    candidate_ids: list[str] = []
    if options.recorded_screening:
        prefix = f"exp-gen-s{options.seed}-recorded-d{options.difficulty}"
        rates, training, dropped = generated.recorded_templates(select=options.select)
        candidates = ""
        progress.say(
            f"templates: {len(training)} of {len(rates)} kept by SmolLM2's recorded screening "
            "(--rescreen to screen again)"
        )
    else:
        if options.data == "generated":
            prefix = f"exp-gen-s{options.seed}-i{options.screen_instances}-d{options.difficulty}"
            candidate_ids = generated.import_spec(
                ctx.sessions,
                ctx.paths.root,
                f"{prefix}-candidates",
                generated.candidates_spec(options),
            )
            candidates = f"{prefix}-candidates"
        else:
            candidates = _import(ctx, f"{prefix}-candidates", rows, split.candidates)
            held_out = _import(ctx, f"{prefix}-held-out", rows, split.held_out)
        screening = _evaluated_run(
            ctx,
            state,
            f"{base_key}:screening",
            dataset=candidates,
            samples=options.screen_samples,
            weights=ctx.model_dir,
            options=options,
            progress=progress,
            label="screening (base, training candidates)",
            turns=options.turns,
        )
        rates = problem_rates(ctx, screening)
    if options.data == "generated":
        if screening is not None:
            rates = generated.template_rates(rates, generated.candidate_templates(options))
            training, dropped = generated.select_templates(rates, select=options.select)
        if not training:
            raise DemoFailed(
                f"screening kept no template of {len(rates)} (the base model's pass rate must "
                "be within [0.1, 0.9]); try another --difficulty or --no-select"
            )
        train_spec, held_out_spec = generated.train_and_held_out_specs(options, training)
        digest = _digest(training)
        train = f"{prefix}-train-{digest}-n{options.train_instances}"
        validation = f"{prefix}-validation-{digest}-n{options.validation}"
        held_out = f"{prefix}-held-out-{digest}-n{options.held_out}"
        generated.import_spec(ctx.sessions, ctx.paths.root, train, train_spec)
        if options.validation:
            generated.import_spec(
                ctx.sessions,
                ctx.paths.root,
                validation,
                generated.validation_spec(options, training),
            )
        held_out_ids = generated.import_spec(ctx.sessions, ctx.paths.root, held_out, held_out_spec)
        split = Split(tuple(candidate_ids), tuple(held_out_ids))
    else:
        training, dropped = select_training_problems(rates, select=options.select)
        if len(training) < 2:
            raise DemoFailed(
                f"screening kept {len(training)} training problem(s) of {len(rates)} "
                "candidates (the base model's pass rate must be neither 0 nor 1); "
                f"{CONTEXTS_PER_PROBLEM_HINT}"
            )
        # The selected problems are their own dataset, named by what they are.
        train = _import(ctx, f"{prefix}-train-{_digest(training)}", rows, training)
    datasets = {"train": train, "held_out": held_out}
    if candidates:
        datasets["candidates"] = candidates
    if "validation" in options.splits:
        datasets["validation"] = validation
    results: list[ArmResult] = []
    for arm in arms:
        key = arm.key(options)
        result = ArmResult(arm, key)
        if arm.mode is None:
            result.weights = ctx.model_dir
        else:
            contexts = _contexts(ctx, results[0].runs["train"], options)[0]
            result.job, result.weights = _trained_job(ctx, arm, key, contexts, progress)
        for split_name in options.splits_of(arm.mode is not None)[:-1]:  # all but held-out
            result.runs[split_name] = _arm_run(
                ctx, state, result, datasets[split_name], options, split_name, progress
            )
        results.append(result)
    # The held-out problems, read once, after every arm has trained and been evaluated on
    # the splits where choices may be made.
    for result in results:
        result.runs["held_out"] = _arm_run(
            ctx, state, result, held_out, options, "held_out", progress
        )
    bandit, count = _contexts(ctx, results[0].runs["train"], options)
    return ExperimentResult(
        options=options,
        database_url=ctx.paths.database_url,
        model_dir=ctx.model_dir,
        split=split,
        screening_run=screening,
        screening_rates=rates,
        training_problems=training,
        dropped=dropped,
        datasets=datasets,
        bandit_dataset=bandit,
        bandit_contexts=count,
        arms=results,
    )


def _arm_run(
    ctx: RunContext,
    state: _State,
    result: ArmResult,
    dataset: str,
    options: ExperimentOptions,
    split: str,
    progress: DemoProgress,
) -> int:
    """The arm's evaluated run on one split (its weights served), reused when done."""
    assert result.weights is not None
    return _evaluated_run(
        ctx,
        state,
        f"{result.key}:{split}:{result.job}",
        dataset=dataset,
        samples=options.samples,
        weights=result.weights,
        options=options,
        progress=progress,
        label=f"{result.arm.name} on {split.replace('_', '-')} problems",
        turns=options.turns_on(split),
    )


def _outcomes(
    ctx: RunContext, result: ExperimentResult, options: ExperimentOptions
) -> dict[str, dict[str, Any]]:
    from cobalt.demo.experiment.outcomes import turn_outcomes

    compare = "cobalt" if options.data == "generated" else "humaneval"
    return {
        arm.arm.name: {
            split: turn_outcomes(ctx.sessions, run, ctx.endpoints.executor, compare=compare)
            for split, run in arm.runs.items()
        }
        for arm in result.arms
    }


def _digest(task_ids: list[str]) -> str:
    import hashlib

    return hashlib.sha256(",".join(task_ids).encode()).hexdigest()[:8]
