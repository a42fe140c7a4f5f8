"""`cobalt run` against model endpoints that are not Cobalt's vLLM: one that is down exits 3
before any run is created, and a strict OpenAI-compatible provider (400 on any request field
OpenAI's API lacks) samples and evaluates, because vLLM's fields are sent only to vLLM."""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session, sessionmaker

from cobalt.shared.ports import free_port
from tests.fakes.openai_server import OPENAI_FIELDS, FakeOpenAI, serve_fake_openai
from tests.support.cli import cobalt_here
from tests.support.runs import add_doubles, cobalt, json_out, run_sample, scripted, turns_of


def test_an_unreachable_endpoint_exits_3_and_creates_no_run(
    cli_env: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    dataset = add_doubles(sessions)
    nowhere = f"http://127.0.0.1:{free_port()}/v1"
    done = cobalt_here(
        cli_env, "run", "sample", "--dataset", dataset, "--base-url", nowhere, "--model", "m"
    )
    assert done.returncode == 3, done.stderr
    assert f"cannot reach the model endpoint {nowhere}" in done.stderr
    assert json_out(cobalt_here(cli_env, "run", "list", "--json"))["runs"] == []


@pytest.fixture
def strict_model() -> object:
    fake = FakeOpenAI(responder=scripted, strict=True)
    with serve_fake_openai(fake) as url:
        yield fake, url


def test_a_strict_provider_samples_and_evaluates(
    strict_model: tuple[FakeOpenAI, str],
    cli_env: dict[str, str],
    sessions: sessionmaker[Session],
) -> None:
    fake, url = strict_model
    dataset = add_doubles(sessions)
    sampled = json_out(
        run_sample(cli_env, dataset, url, "fake-model", "--n", "2", "--turns", "1", "--json")
    )
    assert sampled["status"] == "finished"
    assert fake.requests and all(set(body) <= OPENAI_FIELDS for body in fake.requests)
    turns = turns_of(sessions, sampled["run_id"])
    assert len(turns) == 2 * 2 * 2
    assert all(t.completion_token_ids is None for t in turns)  # none asked for
    evaluated = json_out(cobalt(cli_env, "run", "evaluate", str(sampled["run_id"]), "--json"))
    assert evaluated["problems"] == 2 and evaluated["turns"] == 2


def test_the_extensions_setting_is_read(
    strict_model: tuple[FakeOpenAI, str],
    cli_env: dict[str, str],
    sessions: sessionmaker[Session],
) -> None:
    fake, url = strict_model
    dataset = add_doubles(sessions)
    forced = {**cli_env, "COBALT_REFERENCE_VLLM_EXTENSIONS": "true"}
    failed = run_sample(forced, dataset, url, "fake-model", "--n", "1", "--json")
    assert failed.returncode == 1, failed.stderr
    assert all("return_token_ids" in body for body in fake.requests)
    shown = json_out(cobalt(cli_env, "run", "show", str(_last_run(failed.stdout)), "--json"))
    assert all("Unrecognized request argument" in t["error"] for t in shown["trajectories"])


def _last_run(stdout: str) -> int:
    import json

    return int(json.loads(stdout)["run_id"])
