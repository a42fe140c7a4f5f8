"""`cobalt train start|list|show|stop|resume` as a user runs them (subprocesses; the
mistakes that exit 2 in this process)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.store.models import TrainingJob
from tests.support.cli import cobalt_here
from tests.support.runs import cobalt, json_out
from tests.support.training import bandit_dataset


def test_a_job_from_start_to_resume(
    cli_env: dict[str, str], sessions: sessionmaker[Session], policy_dir: Path
) -> None:
    bandit_dataset(sessions)
    started = json_out(
        cobalt(
            cli_env, "train", "start", "--contexts", "ctx", "--model", str(policy_dir),
            "--name", "first", "--n-samples", "4", "--contexts-per-step", "2",
            "--base-url", "http://127.0.0.1:9/v1", "--served-model", "policy",
            "--max-staleness", "1", "--lr", "1e-5", "--micro-batch-tokens", "20000",
            "--compute-dtype", "bfloat16", "--no-activation-checkpointing",
            "--no-share-prompts", "--reward-format", "instruct",
            "--report-to", "wandb, TensorBoard", "--json",
        )
    )  # fmt: skip
    assert started["status"] == "pending" and started["contexts"] == "ctx"
    assert started["params"]["report_to"] == ["tensorboard", "wandb"]  # the trainer's trackers
    assert started["params"]["reward_format"] == "instruct"
    trainer = started["params"]["trainer"]
    assert trainer["micro_batch_tokens"] == 20_000 and trainer["compute_dtype"] == "bfloat16"
    assert trainer["activation_checkpointing"] is False and trainer["share_prompts"] is False
    assert started["params"]["trainer"]["n_samples"] == 4
    assert started["params"]["trainer"]["lr"] == 1e-5
    assert started["params"]["trainer"]["kl_coef"] == 1e-4  # the paper's default
    assert started["params"]["max_staleness"] == 1
    job = str(started["id"])
    shown = cobalt(cli_env, "train", "show", job)
    assert shown.returncode == 0 and "first" in shown.stdout and "0 consumed" in shown.stdout
    listed = json_out(cobalt(cli_env, "train", "list", "--json"))
    assert [item["name"] for item in listed["items"]] == ["first"]
    assert json_out(cobalt(cli_env, "train", "stop", job, "--json"))["status"] == "stopped"
    assert json_out(cobalt(cli_env, "train", "resume", job, "--json"))["status"] == "running"
    # A running job whose trainer went silent two hours ago reads stale, not running.
    with sessions.begin() as session:
        session.execute(
            update(TrainingJob)
            .where(TrainingJob.id == int(job))
            .values(updated_at=datetime.now(UTC) - timedelta(hours=2))
        )
    silent = cobalt(cli_env, "train", "show", job)
    assert "stale: nothing reported since" in silent.stdout
    assert f"cobalt trainer serve --job {job}" in silent.stdout
    assert "(stale)" in cobalt(cli_env, "train", "list").stdout
    assert json_out(cobalt(cli_env, "train", "list", "--json"))["items"][0]["liveness"] == "stale"
    patient = cobalt({**cli_env, "COBALT_TRAINING_STALE_S": "36000"}, "train", "show", job)
    assert "stale:" not in patient.stdout and "0 consumed" in patient.stdout


def test_mistakes_exit_2_with_a_message(
    cli_env: dict[str, str], sessions: sessionmaker[Session], policy_dir: Path
) -> None:
    bandit_dataset(sessions)
    base = ["train", "start", "--model", str(policy_dir), "--contexts-per-step", "2"]
    unknown = cobalt_here(cli_env, *base, "--contexts", "nope")
    assert unknown.returncode == 2 and "nope" in unknown.stderr
    too_many = cobalt_here(cli_env, *base[:-1], "4", "--contexts", "ctx")
    assert too_many.returncode == 2 and "has 2 contexts" in too_many.stderr
    odd = cobalt_here(cli_env, *base, "--contexts", "ctx", "--updates-per-step", "3")
    assert odd.returncode == 2 and "updates_per_step" in odd.stderr
    missing = cobalt_here(cli_env, "train", "show", "41")
    assert missing.returncode == 2 and "41" in missing.stderr
    # A budget below the longest row is refused at creation, with the value it needs.
    small = cobalt_here(cli_env, *base, "--contexts", "ctx", "--max-prompt-tokens", "1000",
                        "--max-response-tokens", "500", "--micro-batch-tokens", "1024")  # fmt: skip
    assert small.returncode == 2 and "micro_batch_tokens to at least 1500" in small.stderr
    listed = json_out(cobalt_here(cli_env, "train", "list", "--json"))
    assert listed["total"] == 0  # nothing half-written
    misplaced = cobalt_here(cli_env, *base, "--contexts", "ctx", "--turns", "4")
    assert misplaced.returncode == 2 and "turns: multi-turn settings" in misplaced.stderr
    tracker = cobalt_here(cli_env, *base, "--contexts", "ctx", "--report-to", "comet")
    assert tracker.returncode == 2 and "report_to: comet is not a tracker" in tracker.stderr
    no_rank = cobalt_here(cli_env, *base, "--contexts", "ctx", "--lora-alpha", "32")
    assert no_rank.returncode == 2 and "set lora_rank too" in no_rank.stderr


def test_a_lora_job_keeps_its_adapter_settings_in_every_mode(
    cli_env: dict[str, str], sessions: sessionmaker[Session], policy_dir: Path
) -> None:
    bandit_dataset(sessions)
    for mode in ("cobalt", "single-turn", "multi-turn"):
        started = json_out(
            cobalt_here(
                cli_env, "train", "start", "--contexts", "ctx", "--model", str(policy_dir),
                "--name", mode, "--mode", mode, "--contexts-per-step", "1",
                "--updates-per-step", "1", "--lora-rank", "16", "--lora-alpha", "32",
                "--lora-targets", "q_proj", "--lora-targets", "v_proj", "--json",
            )
        )  # fmt: skip
        trainer = started["params"]["trainer"]
        assert (trainer["lora_rank"], trainer["lora_alpha"]) == (16, 32)
        assert trainer["lora_targets"] == ["q_proj", "v_proj"]


def test_a_job_keeps_its_off_policy_correction_and_refuses_it_half_set(
    cli_env: dict[str, str], sessions: sessionmaker[Session], policy_dir: Path
) -> None:
    bandit_dataset(sessions)
    base = ["train", "start", "--contexts", "ctx", "--model", str(policy_dir),
            "--contexts-per-step", "1", "--updates-per-step", "1"]  # fmt: skip
    half = cobalt_here(cli_env, *base, "--tis-cap", "2")
    assert half.returncode == 2 and "set recompute_old_log_probs to true" in half.stderr
    assert json_out(cobalt_here(cli_env, "train", "list", "--json"))["total"] == 0
    started = json_out(cobalt_here(cli_env, *base, "--recompute-old-log-probs", "--tis-cap", "2",
                                   "--mis-threshold", "3", "--json"))  # fmt: skip
    trainer = started["params"]["trainer"]
    assert (trainer["recompute_old_log_probs"], trainer["tis_cap"], trainer["mis_threshold"]) == (
        True, 2.0, 3.0)  # fmt: skip


def test_a_multi_turn_job_keeps_its_episode_settings(
    cli_env: dict[str, str], sessions: sessionmaker[Session], policy_dir: Path
) -> None:
    bandit_dataset(sessions)
    started = json_out(
        cobalt(
            cli_env, "train", "start", "--contexts", "ctx", "--model", str(policy_dir),
            "--mode", "multi-turn", "--contexts-per-step", "1", "--updates-per-step", "1",
            "--turns", "4", "--no-stop-on-pass", "--template", "default", "--json",
        )
    )  # fmt: skip
    assert started["mode"] == "multi-turn"
    params = started["params"]
    assert (params["turns"], params["stop_on_pass"], params["template"]) == (4, False, "default")
    assert params["report_to"] is None  # no --report-to: the trainer's COBALT_REPORT_TO
