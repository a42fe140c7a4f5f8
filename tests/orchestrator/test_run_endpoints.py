"""`cobalt run` against model endpoints that are not Cobalt's vLLM: one that is down exits 3
before any run is created, and a strict OpenAI-compatible provider (400 on any request field
OpenAI's API lacks) samples and evaluates, because vLLM's fields are sent only to vLLM."""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.runs.failures import NOT_RESUMABLE, failed_trajectory_error, run_failure
from cobalt.shared.errors import InvalidInput, Unavailable
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
    # every request was refused as sent: a resume would repeat them, so none is advised
    assert "cobalt run resume" not in shown["error"] and NOT_RESUMABLE in shown["error"]


def _last_run(stdout: str) -> int:
    import json

    return int(json.loads(stdout)["run_id"])


def _runs(env: dict[str, str]) -> list[dict[str, object]]:
    runs: list[dict[str, object]] = json_out(cobalt_here(env, "run", "list", "--json"))["runs"]
    return runs


class _QuietFiles(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base's name)
        """Not on stderr, which the command under test writes its error to."""


@pytest.fixture
def plain_http_server(tmp_path: Path) -> Iterator[str]:
    """An ordinary web server (Python's http.server over an empty folder): it answers every
    path, /v1/models included, with an HTML 404, as a wrong --base-url would."""
    handler = functools.partial(_QuietFiles, directory=str(tmp_path))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def test_a_model_the_endpoint_does_not_serve_is_refused_before_any_run(
    fake_model: tuple[FakeOpenAI, str], cli_env: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    """Issue 49: a wrong --model failed once per problem, then advised a resume that
    repeated the same 404."""
    fake, url = fake_model
    dataset = add_doubles(sessions)
    done = cobalt_here(
        cli_env, "run", "sample", "--dataset", dataset, "--base-url", url, "--model", "nope"
    )
    assert done.returncode == 2 and done.stderr.startswith("error: ")
    assert "does not serve 'nope'; it serves fake-model" in done.stderr
    assert _runs(cli_env) == [] and fake.requests == []
    # a refine run asks the sample run's endpoint for the model it names
    sampled = json_out(run_sample(cli_env, dataset, url, "fake-model", "--n", "1", "--json"))
    refine = ("run", "refine", "--from", str(sampled["run_id"]), "--turns", "1")
    done = cobalt_here(cli_env, *refine, "--model", "nope")
    assert done.returncode == 2 and "does not serve 'nope'" in done.stderr
    assert len(_runs(cli_env)) == 1


def test_an_endpoint_that_is_no_openai_api_is_refused_before_any_run(
    plain_http_server: str, cli_env: dict[str, str], sessions: sessionmaker[Session]
) -> None:
    dataset = add_doubles(sessions)
    done = cobalt_here(
        cli_env, "run", "sample", "--dataset", dataset, "--base-url", plain_http_server,
        "--model", "m",
    )  # fmt: skip
    assert done.returncode == 2 and done.stderr.startswith("error: ")
    assert f"{plain_http_server} is not an OpenAI-compatible API" in done.stderr
    assert "404 text/html" in done.stderr
    assert _runs(cli_env) == []


def test_resume_is_advised_only_for_failures_a_resume_can_fix() -> None:
    refused = failed_trajectory_error(InvalidInput("model endpoint u answered 404: no model"))
    down = failed_trajectory_error(Unavailable("cannot reach the model endpoint u"))
    assert refused.endswith(NOT_RESUMABLE) and not down.endswith(NOT_RESUMABLE)
    assert "resume" not in run_failure(4, [refused, refused]).replace(NOT_RESUMABLE, "")
    assert "`cobalt run resume 4` retries them" in run_failure(4, [down, None])
    mixed = run_failure(4, [refused, down])
    assert "retries the 1 a resume can finish (1 were refused as sent)" in mixed
