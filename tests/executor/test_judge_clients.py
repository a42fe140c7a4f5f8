"""Other judges' clients, unmodified from PyPI, judge right against the executor.

Each client judges a correct and a wrong program over real HTTP against the executor
served as `cobalt executor serve` serves it (uvicorn, the same app, the shared sandbox
pool): Judge0's SDK (`judge0` 0.0.8: single submissions, batches of test cases, status
ids), SandboxFusion's own client (`sandbox-fusion` 0.3.7, with the token in the path),
and verl's sandbox_fusion reward (verl 0.9.1, in the trainer's environment, as a
subprocess), which retries the 504 of a full queue instead of scoring a 0. Tests in
C++ and Java run where the deployment lists the language in `GET /v1/info`, and say
why they skip elsewhere.

tinker-cookbook's grader and SkyRL's code tool and coder1 verifier run from an environment
of their own (.venv-clients) in test_rl_clients.py.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import judge0
import pytest
import sandbox_fusion
from sandbox_fusion import RunCodeRequest, RunStatus

from cobalt.executor.pool import SandboxPool
from cobalt.executor.settings import ExecutorSettings
from tests.executor.helpers import fill_one_test_queue
from tests.support.serving import serve_executor

ROOT = Path(__file__).resolve().parents[2]
TRAINER_PYTHON = ROOT / ".venv-trainer" / "bin" / "python"
TOKEN = "clients-s3cret"

DOUBLE = "print(int(input()) * 2)\n"
OFF_BY_ONE = "print(int(input()) * 2 + 1)\n"
CPP_DOUBLE = (
    "#include <iostream>\nint main() { long x; std::cin >> x; std::cout << 2 * x << '\\n'; }\n"
)
CPP_OFF_BY_ONE = CPP_DOUBLE.replace("2 * x", "2 * x + 1")
JAVA_DOUBLE = (
    "import java.util.Scanner;\npublic class Main { public static void main(String[] a) {\n"
    "  System.out.println(2 * new Scanner(System.in).nextLong()); } }\n"
)
JAVA_OFF_BY_ONE = JAVA_DOUBLE.replace("2 * new", "1 + 2 * new")
PROGRAMS = {
    "python": (DOUBLE, OFF_BY_ONE),
    "cpp": (CPP_DOUBLE, CPP_OFF_BY_ONE),
    "java": (JAVA_DOUBLE, JAVA_OFF_BY_ONE),
}
JUDGE0_ALIASES = {
    "python": judge0.LanguageAlias.PYTHON,
    "cpp": judge0.LanguageAlias.CPP,
    "java": judge0.LanguageAlias.JAVA,
}


@pytest.fixture(scope="module")
def guarded_url(sandbox_pool: SandboxPool) -> Iterator[str]:
    """The executor with a token, served over real HTTP."""
    settings = ExecutorSettings(slots=sandbox_pool.config.slots, auth_token=TOKEN)
    with serve_executor(settings, sandbox_pool) as url:
        yield url


def skip_unless_offered(url: str, language: str) -> None:
    offered = httpx.get(f"{url}/v1/info", headers={"Authorization": f"Bearer {TOKEN}"}).json()
    if language not in offered["languages"]:
        pytest.skip(
            f"this executor does not run {language!r} (GET /v1/info lists "
            f"{offered['languages']}); the test runs where it does"
        )


# --- Judge0's SDK ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def judge0_client(guarded_url: str) -> judge0.Client:
    # The SDK's own Client, as for a self-hosted Judge0, with Judge0's auth header.
    return judge0.Client(guarded_url, headers={"X-Auth-Token": TOKEN})


@pytest.mark.parametrize("language", ["python", "cpp", "java"])
def test_judge0_sdk_judges_a_correct_and_a_wrong_program(
    judge0_client: judge0.Client, guarded_url: str, language: str
) -> None:
    skip_unless_offered(guarded_url, language)
    right, wrong = PROGRAMS[language]
    alias = JUDGE0_ALIASES[language]
    passed = judge0.run(
        client=judge0_client, source_code=right, language=alias, stdin="21", expected_output="42"
    )
    assert passed.status == judge0.Status.ACCEPTED, (passed.status, passed.stderr)
    assert passed.stdout == "42\n"
    failed = judge0.run(
        client=judge0_client, source_code=wrong, language=alias, stdin="21", expected_output="42"
    )
    assert failed.status == judge0.Status.WRONG_ANSWER
    assert failed.stdout == "43\n"


def test_judge0_sdk_test_cases_go_through_the_batch_routes(judge0_client: judge0.Client) -> None:
    results = judge0.run(
        client=judge0_client,
        source_code=DOUBLE,
        language=judge0.LanguageAlias.PYTHON,
        test_cases=[("1", "2"), ("5", "10"), ("7", "15")],
    )
    assert [r.status for r in results] == [
        judge0.Status.ACCEPTED,
        judge0.Status.ACCEPTED,
        judge0.Status.WRONG_ANSWER,
    ]
    assert all(r.token is not None and r.finished_at is not None for r in results)


@pytest.mark.parametrize(
    ("code", "limits", "status"),
    [
        ("raise SystemExit(3)", {}, judge0.Status.RUNTIME_ERROR_NZEC),
        (
            "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)",
            {},
            judge0.Status.RUNTIME_ERROR_SIGSEGV,
        ),
        (
            "while True:\n    pass",
            {"cpu_time_limit": 1, "wall_time_limit": 2},
            judge0.Status.TIME_LIMIT_EXCEEDED,
        ),
        ("print('no expected output')", {}, judge0.Status.ACCEPTED),
    ],
    ids=["nzec", "sigsegv", "time-limit", "no-expected-output"],
)
def test_judge0_sdk_reads_each_status(
    judge0_client: judge0.Client, code: str, limits: dict[str, float], status: judge0.Status
) -> None:
    result = judge0.run(
        client=judge0_client, source_code=code, language=judge0.LanguageAlias.PYTHON, **limits
    )
    assert result.status == status, (result.status, result.stderr, result.message)


def test_judge0_sdk_refuses_what_the_deployment_lacks(judge0_client: judge0.Client) -> None:
    assert {lang.id for lang in judge0_client.languages} >= {71}
    assert 70 not in {lang.id for lang in judge0_client.languages}  # Python 2: not offered
    with pytest.raises(RuntimeError, match="does not support language"):
        judge0.run(client=judge0_client, source_code="x", language=judge0.LanguageAlias.COBOL)


def test_judge0_without_the_token_is_refused(guarded_url: str) -> None:
    with pytest.raises(RuntimeError, match="Authentication failed"):
        judge0.Client(guarded_url)


# --- SandboxFusion's client -------------------------------------------------------------------


@pytest.mark.parametrize("language", ["python", "cpp", "java"])
def test_sandbox_fusion_client_runs_a_correct_and_a_wrong_program(
    guarded_url: str, language: str
) -> None:
    skip_unless_offered(guarded_url, language)
    right, wrong = PROGRAMS[language]
    endpoint = f"{guarded_url}/t/{TOKEN}"  # its client sends no header: the token is the path
    outputs = []
    for code in (right, wrong):
        response = sandbox_fusion.run_code(
            RunCodeRequest(code=code, stdin="21\n", language=language),
            endpoint=endpoint,
            max_attempts=1,
        )
        assert response.status == RunStatus.Success, response
        outputs.append(response.run_result.stdout)
    assert outputs == ["42\n", "43\n"]


def test_sandbox_fusion_client_reports_a_crash_as_failed(guarded_url: str) -> None:
    response = sandbox_fusion.run_code(
        RunCodeRequest(code="raise ValueError('boom')", language="python"),
        endpoint=f"{guarded_url}/t/{TOKEN}",
        max_attempts=1,
    )
    assert response.status == RunStatus.Failed
    assert "ValueError: boom" in response.run_result.stderr


# --- verl's sandbox_fusion reward, in the trainer's environment ---------------------------------

VERL_SCRIPT = r"""
import json, logging, sys
logging.basicConfig(level=logging.WARNING)
from verl.utils.reward_score.sandbox_fusion import compute_score
from verl.utils.reward_score.sandbox_fusion.utils import call_sandbox_api, check_correctness

args = json.loads(sys.argv[1])
out = {}
for name, code in args["programs"].items():
    score, _ = compute_score(args["url"], None, 1024, "```python\n" + code + "```", args["tests"])
    out[name] = score
for language, (right, wrong) in args["other_languages"].items():  # verl's language argument
    for name, code in (("right", right), ("wrong", wrong)):
        results, _ = check_correctness(args["url"], args["tests"], code, 10, 1024, language)
        out[f"{language} {name}"] = results
print("ready", flush=True)
sys.stdin.readline()  # the parent has filled the other executor's queue
out["overloaded"] = call_sandbox_api(args["overloaded_url"], "print(7)", None, 1, 3, 1024, "python")
print(json.dumps(out), flush=True)
"""


@pytest.mark.skipif(not TRAINER_PYTHON.exists(), reason="no .venv-trainer (make setup builds it)")
def test_verl_scores_right_and_retries_a_full_queue(
    executor_url: str, sandbox_pool: SandboxPool
) -> None:
    # A second executor whose queue holds one test and whose /run_code holds a request
    # 0.5 s: busy for 2 s, it answers verl's first call 504, and one of verl's retries
    # runs. (With a 429 verl would have scored the program 0 at once.)
    tiny = ExecutorSettings(
        slots=sandbox_pool.config.slots, max_pending_tests=1, run_code_queue_wait_s=0.5
    )
    tests = {"inputs": ["21\n", "5\n"], "outputs": ["42\n", "10\n"]}
    # C++ and Java through verl's `language` where this deployment runs them.
    offered = httpx.get(f"{executor_url}/v1/info").json()["languages"]
    with serve_executor(tiny, sandbox_pool) as tiny_url:
        args = {
            "url": f"{executor_url}/run_code",
            "programs": {"right": DOUBLE, "wrong": OFF_BY_ONE},
            "tests": tests,
            "overloaded_url": f"{tiny_url}/run_code",
            "other_languages": {
                lang: PROGRAMS[lang] for lang in ("cpp", "java") if lang in offered
            },
        }
        with subprocess.Popen(
            [str(TRAINER_PYTHON), "-c", VERL_SCRIPT, json.dumps(args)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        ) as verl:
            assert verl.stdout is not None and verl.stdin is not None
            ready = verl.stdout.readline()  # verl imported, both programs scored
            if ready.strip() == "ready":
                filler = fill_one_test_queue(tiny_url, 2)
                verl.stdin.write("go\n")
                verl.stdin.flush()
                filler.join()
            stdout, stderr = verl.communicate(timeout=240)
    assert verl.returncode == 0, stderr[-3000:]
    out = json.loads(stdout.strip().splitlines()[-1])
    assert out["right"] == 1.0 and out["wrong"] == 0.0, out
    for language in args["other_languages"]:
        assert out[f"{language} right"] == [True, True], out
        assert out[f"{language} wrong"] == [False, False], out
    response, error = out["overloaded"]
    assert error is None, error
    assert response["status"] == "Success" and response["run_result"]["stdout"] == "7\n"
    assert "Gateway Timeout (504)" in stderr  # verl's warning: it got the 504, and retried
