"""`--set NAME=VALUE`: any sampling setting on every rollout command, checked by its model."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

from tests.support.cli import cobalt_here
from tests.support.runs import json_out
from tests.support.training import bandit_dataset


def test_set_reaches_a_training_job_and_wins_over_the_option(
    cli_env: dict[str, str], sessions: sessionmaker[Session], policy_dir: Path
) -> None:
    bandit_dataset(sessions)
    base = ["train", "start", "--contexts", "ctx", "--model", str(policy_dir)]
    small = ["--n-samples", "2", "--contexts-per-step", "1", "--updates-per-step", "1"]
    chosen = ["--temperature", "0.9", "--set", "temperature=0.3", "--set", "seed=7"]
    started = json_out(cobalt_here(cli_env, *base, *small, *chosen, "--json"))
    assert (started["params"]["temperature"], started["params"]["seed"]) == (0.3, 7)
    unknown = cobalt_here(cli_env, *base, *small, "--set", "min_q=0.1")
    assert unknown.returncode == 2 and "--set 'min_q=0.1'" in unknown.stderr
    assert "temperature" in unknown.stderr  # the names it takes
    bad = cobalt_here(cli_env, *base, *small, "--set", "top_p=2")
    assert bad.returncode == 2 and "top_p" in bad.stderr


def test_set_is_checked_before_a_run_starts(cli_env: dict[str, str]) -> None:
    endpoint = ["--base-url", "http://127.0.0.1:9/v1", "--model", "m"]
    sample = ["run", "sample", "--dataset", "none", *endpoint]
    no_value = cobalt_here(cli_env, *sample, "--set", "temperature")
    assert no_value.returncode == 2 and "NAME=VALUE" in no_value.stderr
    bad = cobalt_here(cli_env, *sample, "--set", "temperature=hot")
    assert bad.returncode == 2 and "--temperature" in bad.stderr
    refine = cobalt_here(cli_env, "run", "refine", "--from", "1", "--set", "max_tokens=5")
    assert refine.returncode == 2 and "--set 'max_tokens=5'" in refine.stderr
