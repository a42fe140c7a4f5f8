"""Rollout runs end to end: the CLI, the real executor, PostgreSQL, Redis (RQ) and a
deterministic OpenAI-compatible server standing in for the model (its loop logic only;
tests/orchestrator/test_runs_vllm.py runs the same path against real vLLM)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker
from tokenizers import Tokenizer, models, pre_tokenizers

from cobalt.orchestrator.rollouts.conversation import messages_of_turns
from cobalt.orchestrator.rollouts.request_seeds import request_seed
from cobalt.orchestrator.runs import service
from cobalt.orchestrator.worker.jobs import JobResources, run_problem
from cobalt.orchestrator.worker.runtime import job_context
from cobalt.shared.clients import ExecutorAddress
from cobalt.shared.defaults import EVALUATION_FEEDBACK_TURNS
from tests.fakes.openai_server import FakeOpenAI
from tests.support.cli import cobalt_here
from tests.support.runs import (
    PROBLEMS,
    RIGHT,
    add_doubles,
    cobalt,
    json_out,
    keys_and_answers,
    run_sample,
    turns_of,
    worker,
)


@pytest.fixture
def dataset(sessions: sessionmaker[Session]) -> str:
    return add_doubles(sessions)


def test_sample_refine_evaluate(
    dataset: str,
    fake_model: tuple[FakeOpenAI, str],
    cli_env: dict[str, str],
    sessions: sessionmaker[Session],
    tmp_path: Path,
) -> None:
    fake, url = fake_model
    sampled = json_out(
        run_sample(
            cli_env, dataset, url, "fake-model", "--n", "3", "--temperature", "0.6", "--json"
        )
    )
    sample_id = sampled["run_id"]
    assert sampled["status"] == "finished"
    first = turns_of(sessions, sample_id)
    assert len(first) == 2 * 3 and {t.turn_index for t in first} == {0}
    by_sample = {t.sample_index: t for t in first if t.problem_id == first[0].problem_id}
    assert by_sample[0].public_verdicts == ["wrong_answer", "wrong_answer"]
    assert "4" in by_sample[0].feedback and "3" in by_sample[0].feedback
    assert by_sample[1].public_passed and by_sample[1].code == "print(2 * int(input()))\n"
    assert by_sample[2].code is None and by_sample[2].public_verdicts == []
    # What each program printed on each public test is kept, for the UI's test view.
    assert [o["stdout"] for o in by_sample[0].public_outputs or []] == ["3\n", "6\n"]
    assert [o["exit_code"] for o in by_sample[0].public_outputs or []] == [0, 0]
    assert by_sample[2].public_outputs is None  # no program, nothing ran
    assert by_sample[1].stored_response.startswith("Fixed:")  # thinking stripped
    assert by_sample[1].raw_response == RIGHT
    assert by_sample[0].policy_version == 7 and by_sample[0].completion_token_ids
    assert fake.requests[0]["n"] == 3  # turn 0 is one request with n choices

    refined = json_out(
        cobalt(cli_env, "run", "refine", "--from", str(sample_id), "--turns", "2", "--json")
    )
    refine_id = refined["run_id"]
    turns = turns_of(sessions, refine_id)
    assert len(turns) == 2 * 3 * 3
    zero = [t for t in turns if t.turn_index == 0]
    assert [t.raw_response for t in zero] == [t.raw_response for t in first]  # shared turn 0
    trajectory = [t for t in turns if (t.problem_id, t.sample_index) == (first[0].problem_id, 0)]
    assert trajectory[0].messages and trajectory[1].messages == []  # the prompt, once
    sent = messages_of_turns(trajectory)
    roles = [m["role"] for m in sent[1]]
    assert roles[-3:] == ["user", "assistant", "user"]
    assert sent[1][-2]["content"] == by_sample[0].stored_response
    assert sent[1][-1]["content"] == by_sample[0].feedback
    # Rebuilt from the rows, the prompts are exactly what the model was sent.
    assert all(any(r["messages"] == m for r in fake.requests) for m in sent)
    assert all(t.public_passed for t in turns if t.turn_index >= 1)

    plot = tmp_path / "pass.png"
    report = json_out(
        cobalt(
            cli_env, "run", "evaluate", str(refine_id), "--k", "2", "--plot", str(plot), "--json"
        )
    )
    assert report["pass_at_1"] == pytest.approx([1 / 3, 1.0, 1.0])
    assert report["pass_at_k"]["2"] == pytest.approx([2 / 3, 1.0, 1.0])
    assert report["problems"] == 2 and report["samples"] == 3
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert report["mean_reward"] is None  # no tokenizer given: rewards not scored
    evaluated = {
        (t.problem_id, t.sample_index, t.turn_index): t for t in turns_of(sessions, refine_id)
    }
    wrong = evaluated[(first[0].problem_id, 0, 0)]
    assert [o["stdout"] for o in wrong.hidden_outputs or []] == ["8\n", "101\n"]
    assert evaluated[(first[0].problem_id, 2, 0)].hidden_outputs is None  # no program

    policy = tmp_path / "policy"
    policy.mkdir()
    words = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    words.save(str(policy / "tokenizer.json"))
    scored = cobalt(cli_env, "run", "evaluate", str(refine_id), "--tokenizer", str(policy))
    assert scored.returncode == 0, scored.stderr
    assert "mean reward" in scored.stdout and "not scored" not in scored.stderr
    rewards = json_out(
        cobalt({**cli_env, "COBALT_POLICY_TOKENIZER": str(policy)}, "run", "evaluate",
               str(refine_id), "--json")
    )["mean_reward"]  # fmt: skip
    # Turn 0: one wrong program and one without code per problem; later turns all right.
    assert rewards[1] == rewards[2] >= 0.99 and rewards[0] < 0

    shown = json_out(cobalt(cli_env, "run", "show", str(refine_id), "--json"))
    assert len(shown["trajectories"]) == 6
    assert shown["trajectories"][0]["turns"][1]["hidden_passed"] is True
    listed = json_out(cobalt(cli_env, "run", "list", "--json"))
    assert {r["id"] for r in listed["runs"]} == {sample_id, refine_id}


def decoding_sent(fake: FakeOpenAI) -> set[tuple[float, float, int]]:
    """The (temperature, top_p, max_tokens) of every request the model received."""
    return {(r["temperature"], r["top_p"], r["max_tokens"]) for r in fake.requests}


def seeds_sent(fake: FakeOpenAI) -> list[int | None]:
    return sorted((r.get("seed") for r in fake.requests), key=lambda seed: (seed is None, seed))


def derived_seeds(seed: int, samples: range, turns: range) -> list[int | None]:
    """The request seeds a run of `seed` sends over the doubles (`request_seeds`)."""
    return sorted(
        request_seed(seed, problem.external_id, sample, turn)
        for problem in PROBLEMS
        for sample in samples
        for turn in turns
    )


def test_a_seeded_run_gives_each_request_its_own_seed_and_a_second_run_the_same(
    dataset: str, fake_model: tuple[FakeOpenAI, str], cli_env: dict[str, str]
) -> None:
    """Common random numbers: each (problem, sample, turn) its own seed, turn 0 one request
    per sample, and a second run with the seed sends exactly those seeds again; without a
    seed, turn 0 is one request of n choices and no request carries one."""
    fake, url = fake_model
    seeded = ("--n", "3", "--turns", "1", "--seed", "5", "--json")
    json_out(run_sample(cli_env, dataset, url, "fake-model", *seeded))
    expected = derived_seeds(5, range(3), range(2))
    assert len(set(expected)) == len(expected) == 2 * 3 * 2
    assert seeds_sent(fake) == expected
    assert all(r["n"] == 1 for r in fake.requests)
    fake.requests.clear()
    json_out(run_sample(cli_env, dataset, url, "fake-model", *seeded))
    assert seeds_sent(fake) == expected
    fake.requests.clear()
    json_out(run_sample(cli_env, dataset, url, "fake-model", "--n", "3", "--turns", "0", "--json"))
    assert seeds_sent(fake) == [None, None] and [r["n"] for r in fake.requests] == [3, 3]


def test_a_refine_run_takes_its_sample_run_s_settings_unless_given(
    dataset: str,
    fake_model: tuple[FakeOpenAI, str],
    cli_env: dict[str, str],
    sessions: sessionmaker[Session],
) -> None:
    """Options not given are the sample run's, not the defaults `--help` would show; a
    given one overrides only itself."""
    fake, url = fake_model
    sampled = run_sample(
        cli_env, dataset, url, "fake-model", "--n", "1", "--temperature", "0.2",
        "--top-p", "0.5", "--max-tokens", "321", "--seed", "5", "--think-cap", "30", "--json",
    )  # fmt: skip
    sample_id = json_out(sampled)["run_id"]
    first = turns_of(sessions, sample_id)
    assert all(len(t.stored_response) <= 30 < len(t.raw_response) for t in first)
    fake.requests.clear()

    inheriting = json_out(cobalt(cli_env, "run", "refine", "--from", str(sample_id), "--json"))
    params = service.run_public(sessions, inheriting["run_id"]).params
    assert (params.temperature, params.top_p, params.max_tokens, params.seed) == (0.2, 0.5, 321, 5)
    assert params.think_cap_chars == 30 and params.n == 1
    # The refine run's own settings are not the sample run's (it had no feedback turns).
    assert (params.feedback_turns, params.stop_on_pass) == (EVALUATION_FEEDBACK_TURNS, False)
    assert decoding_sent(fake) == {(0.2, 0.5, 321)} and len(fake.requests) == 2 * 8
    assert seeds_sent(fake) == derived_seeds(5, range(1), range(1, 9))
    # Turn 0's history is cut to the sample run's cap, as the sample run's own was.
    zero = [t for t in turns_of(sessions, inheriting["run_id"]) if t.turn_index == 0]
    assert [t.stored_response for t in zero] == [t.stored_response for t in first]
    fake.requests.clear()

    hotter = cobalt(
        cli_env, "run", "refine", "--from", str(sample_id), "--temperature", "0.9",
        "--feedback-turns", "1", "--json",
    )  # fmt: skip
    params = service.run_public(sessions, json_out(hotter)["run_id"]).params
    assert (params.temperature, params.top_p, params.max_tokens, params.seed) == (0.9, 0.5, 321, 5)
    assert params.feedback_turns == 1
    assert decoding_sent(fake) == {(0.9, 0.5, 321)}
    assert seeds_sent(fake) == derived_seeds(5, range(1), range(1, 2))


def test_a_retried_job_writes_no_turn_twice(
    dataset: str,
    fake_model: tuple[FakeOpenAI, str],
    cli_env: dict[str, str],
    sessions: sessionmaker[Session],
    store_url: str,
    executor_url: str,
) -> None:
    fake, url = fake_model
    sample_id = json_out(
        run_sample(cli_env, dataset, url, "fake-model", "--n", "2", "--turns", "2", "--json")
    )["run_id"]
    before = [
        (t.problem_id, t.sample_index, t.turn_index, t.raw_response)
        for t in turns_of(sessions, sample_id)
    ]
    assert len(before) == 2 * 2 * 3
    requests = len(fake.requests)
    problem_id = turns_of(sessions, sample_id)[0].problem_id
    settings = job_context().settings.model_copy(update={"database_url": store_url})
    run_problem(
        sample_id,
        problem_id,
        resources=JobResources.here(settings, ExecutorAddress(executor_url), api_key=None),
    )
    after = [
        (t.problem_id, t.sample_index, t.turn_index, t.raw_response)
        for t in turns_of(sessions, sample_id)
    ]
    assert after == before
    assert len(fake.requests) == requests  # nothing left to do: no model call


def test_unreachable_model_fails_with_the_reason_and_resume_recovers(
    dataset: str,
    fake_model: tuple[FakeOpenAI, str],
    cli_env: dict[str, str],
    sessions: sessionmaker[Session],
) -> None:
    fake, url = fake_model
    fake.fail_next = [500] * 40  # more than the client's retries, for every problem
    failed = run_sample(cli_env, dataset, url, "fake-model", "--n", "2", "--json")
    assert failed.returncode == 1, failed.stderr
    run_id = json.loads(failed.stdout)["run_id"]
    shown = json_out(cobalt(cli_env, "run", "show", str(run_id), "--json"))
    assert shown["status"] == "failed"
    assert all(t["status"] == "failed" for t in shown["trajectories"])
    assert all("injected 500" in t["error"] for t in shown["trajectories"])
    assert turns_of(sessions, run_id) == []  # no silent zero-reward turns
    fake.fail_next = []
    resumed = json_out(cobalt(cli_env, "run", "resume", str(run_id), "--json"))
    assert resumed["status"] == "finished"
    assert len(turns_of(sessions, run_id)) == 2 * 2


def test_bad_arguments_get_clear_errors(dataset: str, cli_env: dict[str, str]) -> None:
    sample = ("run", "sample", "--base-url", "http://x/v1", "--model", "m")
    missing = cobalt_here(cli_env, *sample, "--dataset", "nope", "--json")
    assert missing.returncode == 2 and "no dataset named 'nope'" in missing.stderr
    bad_n = cobalt_here(cli_env, *sample, "--dataset", dataset, "--n", "0")
    assert bad_n.returncode == 2 and "--n" in bad_n.stderr
    detached = cobalt_here(cli_env, *sample, "--dataset", dataset, "--detach")
    assert detached.returncode == 2 and "COBALT_REDIS_URL" in detached.stderr
    unknown = cobalt_here(cli_env, "run", "show", "999")
    assert unknown.returncode == 2 and re.search("run 999", unknown.stderr)


# --- on Redis through RQ workers -----------------------------------------------------------


def test_detached_run_is_done_by_rq_workers(
    pg_dataset: str,
    fake_model: tuple[FakeOpenAI, str],
    rq_env: dict[str, str],
    pg_sessions: sessionmaker[Session],
) -> None:
    _, url = fake_model
    queued = json_out(
        run_sample(
            rq_env, pg_dataset, url, "fake-model", "--n", "2", "--turns", "1", "--detach", "--json"
        )
    )
    assert queued["status"] == "pending"
    assert turns_of(pg_sessions, queued["run_id"]) == []
    burst = worker(rq_env, "--burst")
    output, _ = burst.communicate(timeout=180)
    assert burst.returncode == 0, output
    shown = json_out(cobalt(rq_env, "run", "show", str(queued["run_id"]), "--json"))
    assert shown["status"] == "finished"
    assert shown["turns_written"] == 2 * 2 * 2


def test_killed_worker_loses_and_duplicates_nothing(
    pg_dataset: str,
    fake_model: tuple[FakeOpenAI, str],
    rq_env: dict[str, str],
    pg_sessions: sessionmaker[Session],
) -> None:
    import signal
    import time

    fake, url = fake_model
    fake.delay_s = 0.4  # every model call takes a while, so the kill lands mid-job
    run_id = json_out(
        run_sample(
            rq_env, pg_dataset, url, "fake-model", "--n", "2", "--turns", "3", "--detach", "--json"
        )
    )["run_id"]
    victim = worker(rq_env)
    deadline = time.monotonic() + 120
    while len(keys_and_answers(pg_sessions, run_id)) < 3:
        assert time.monotonic() < deadline, "the worker wrote nothing"
        time.sleep(0.05)
    os.killpg(victim.pid, signal.SIGKILL)  # the worker and its work-horse, no clean-up
    victim.wait()
    assert victim.stdout is not None
    victim.stdout.close()
    before = keys_and_answers(pg_sessions, run_id)
    assert 3 <= len(before) < 2 * 2 * 4, "the kill should land mid-run"

    resumed = json_out(cobalt(rq_env, "run", "resume", str(run_id), "--detach", "--json"))
    assert resumed["run_id"] == run_id
    finisher = worker(rq_env, "--burst")
    output, _ = finisher.communicate(timeout=180)
    assert finisher.returncode == 0, output

    after = keys_and_answers(pg_sessions, run_id)
    assert sorted(after) == [
        (p, s, t) for p in sorted({k[0] for k in after}) for s in range(2) for t in range(4)
    ]
    assert {k: after[k] for k in before} == before  # what was written stays as written
    shown = json_out(cobalt(rq_env, "run", "show", str(run_id), "--json"))
    assert shown["status"] == "finished"


def test_stop_on_pass_ends_trajectories_and_evaluation_carries_their_program(
    dataset: str,
    fake_model: tuple[FakeOpenAI, str],
    cli_env: dict[str, str],
    sessions: sessionmaker[Session],
) -> None:
    _, url = fake_model
    run_id = json_out(
        run_sample(
            cli_env,
            dataset,
            url,
            "fake-model",
            "--n",
            "3",
            "--turns",
            "2",
            "--stop-on-pass",
            "--json",
        )
    )["run_id"]
    per_sample = [
        sorted(t.turn_index for t in turns_of(sessions, run_id) if t.sample_index == s)
        for s in range(3)
    ]
    assert per_sample == [[0, 0, 1, 1], [0, 0], [0, 0, 1, 1]]  # two problems each
    report = json_out(cobalt(cli_env, "run", "evaluate", str(run_id), "--json"))
    assert report["pass_at_1"] == pytest.approx([1 / 3, 1.0, 1.0])
