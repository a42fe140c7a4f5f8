"""RL stacks' graders, unmodified from PyPI, judge right against `cobalt executor serve`.

tinker-cookbook 0.6.1's grader and SkyRL 0.4.0's code tool and coder1 verifier run in
.venv-clients (scripts/setup-clients-venv.sh: both packages declare their training
stacks, torch and more, which these graders never import, so they get an environment of
their own) as subprocesses, against one executor process:

- on port 8080 of a loopback address of its own, as the coder1 verifier finds a server:
  it posts to `http://{server}:8080/run_code`, only the host configurable;
- with the Python package set (`COBALT_EXECUTOR_PYTHON_PACKAGES`): tinker-cookbook's
  harness, LiveCodeBench's test runner sent as `files`, imports numpy;
- with `COBALT_EXECUTOR_MAX_WALL_S` raised: tinker-cookbook asks for (6 + 1) s per test
  + 5 s for its whole harness, 75 s for the ten tests here, which 60 s would refuse.

SkyRL's wheel installs its agent package as `skyrl-agent/skyrl_agent`, outside the import
path, and that package's `__init__` imports SkyRL's trainer (vLLM, torch, Ray) before
any tool; the script below puts the wheel's own directories under empty parent packages
and imports the tool's and the verifier's modules from them, unchanged. C++ and Java run
where `GET /v1/info` lists them (tinker-cookbook's grader itself is Python only: its
harness is a Python test runner; its client takes a language, tested here).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.serving import executor_process

ROOT = Path(__file__).resolve().parents[2]
CLIENTS_PYTHON = ROOT / ".venv-clients" / "bin" / "python"
DIST_PACKAGES = "/usr/lib/python3/dist-packages"

pytestmark = pytest.mark.skipif(
    not CLIENTS_PYTHON.exists(), reason="no .venv-clients (make setup builds it)"
)

DOUBLE = "print(int(input()) * 2)\n"
OFF_BY_ONE = "print(int(input()) * 2 + 1)\n"
ADD = "class Solution:\n    def add(self, a, b):\n        return a + b\n"
SUBTRACT = ADD.replace("a + b", "a - b")
# Programs that print 2 x 21 (right) or 43 (wrong). SkyRL's tool wraps a program's last line
# in print(...) unless it is indented (its Python post-processing, for every language): the
# closing braces are indented.
CPP_PRINTS = "#include <iostream>\nint main() {\n  std::cout << %s << std::endl;\n  }\n"
JAVA_PRINTS = (
    "public class Main { public static void main(String[] a) {\n  System.out.println(%s);\n  } }\n"
)
# Programs that read their number from a file sent with the request (tinker's client has
# `files`, no stdin).
CPP_FILE = (
    '#include <fstream>\n#include <iostream>\nint main() { std::ifstream in("in.txt");'
    " long x; in >> x; std::cout << %s << '\\n'; }\n"
)
JAVA_FILE = (
    "import java.nio.file.*;\npublic class Main { public static void main(String[] a)"
    ' throws Exception {\n  long x = Long.parseLong(Files.readString(Path.of("in.txt")).trim());'
    "\n  System.out.println(%s); } }\n"
)


def _free_loopback_for_8080() -> str:
    """A loopback address whose port 8080 is free (Linux routes all of 127/8 to lo)."""
    for host in ("127.0.80.80", "127.0.80.81", "127.0.80.82"):
        with socket.socket() as probe:
            try:
                probe.bind((host, 8080))
            except OSError:
                continue
            return host
    pytest.skip("port 8080 is taken on every loopback address tried (a listener on 0.0.0.0?)")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, list[str]]]:
    """(host, base URL, languages offered) of the executor the clients call."""
    host = _free_loopback_for_8080()
    settings = {
        "COBALT_EXECUTOR_SLOTS": "2",
        "COBALT_EXECUTOR_NO_AUTH": "true",  # SandboxFusion's clients send no header
        "COBALT_EXECUTOR_PYTHON_PACKAGES": DIST_PACKAGES,
        "COBALT_EXECUTOR_MAX_WALL_S": "120",
    }
    log = tmp_path_factory.mktemp("rl-clients") / "server.log"
    with executor_process(settings, log, host=host, port=8080) as (_, url):
        offered = httpx.get(f"{url}/v1/info").json()["languages"]
        yield host, url, offered


def skip_unless_offered(offered: list[str], language: str) -> None:
    if language not in offered:
        pytest.skip(f"this executor does not run {language!r} (GET /v1/info lists {offered})")


def run_client(script: str, args: dict[str, Any], env: dict[str, str]) -> dict[str, Any]:
    """Run `script` in .venv-clients with `args` (JSON) and return the JSON it prints last."""
    done = subprocess.run(
        [str(CLIENTS_PYTHON), "-c", script, json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, **env},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


# --- tinker-cookbook ------------------------------------------------------------------------

TINKER_SCRIPT = r"""
import asyncio, json, sys
from tinker_cookbook.recipes.code_rl.code_grading import (
    sandbox_check_correctness, taco_to_lcb_format)
from tinker_cookbook.sandbox import SandboxFusionClient

args = json.loads(sys.argv[1])

async def main():
    out = {}
    for name, (tests, code) in args["graded"].items():
        passed, details = await sandbox_check_correctness(taco_to_lcb_format(tests), code)
        out[name] = [passed, details]
    client = SandboxFusionClient()  # the grader's own client, with its language argument
    for name, (language, code) in args["languages"].items():
        passed, response = await client.run(code, {"in.txt": "21\n"}, 10, language=language)
        out[name] = [passed, response]
    await client.close()
    print(json.dumps(out))

asyncio.run(main())
"""


@pytest.fixture(scope="module")
def tinker(server: tuple[str, str, list[str]]) -> dict[str, Any]:
    _, url, offered = server
    stdin_tests = {
        "inputs": [f"{n}\n" for n in range(10)],
        "outputs": [f"{2 * n}\n" for n in range(10)],
    }
    call_tests = {"inputs": ["2\n3", "4\n5"], "outputs": ["5", "9"], "fn_name": "add"}
    languages = {}
    for language, source in (("cpp", CPP_FILE), ("java", JAVA_FILE)):
        if language in offered:
            languages[f"{language} right"] = (language, source % "2 * x")
            languages[f"{language} wrong"] = (language, source % "2 * x + 1")
    args = {
        "graded": {
            "stdin right": (stdin_tests, DOUBLE),
            "stdin wrong": (stdin_tests, OFF_BY_ONE),
            "call right": (call_tests, ADD),
            "call wrong": (call_tests, SUBTRACT),
        },
        "languages": languages,
    }
    return run_client(TINKER_SCRIPT, args, {"SANDBOX_URL": f"{url}/run_code"})


def test_tinker_cookbook_grader_passes_a_right_program_and_fails_a_wrong_one(
    tinker: dict[str, Any],
) -> None:
    # Ten stdin tests: the grader's run_timeout is (6 + 1) x 10 + 5 = 75 s, above 60.
    for kind in ("stdin", "call"):
        passed, details = tinker[f"{kind} right"]
        assert passed is True, details
        assert details["status"] == "Success" and details["run_result"]["return_code"] == 0
        passed, details = tinker[f"{kind} wrong"]
        assert passed is False, details
        # The harness itself ran the tests and found the wrong answer (not an import error,
        # a refused request or a sandbox error, all of which also score False).
        assert details["status"] == "Failed", details
        assert "'error_message': 'Wrong Answer'" in details["run_result"]["stdout"], details
    wrong_stdin = tinker["stdin wrong"][1]["run_result"]["stdout"]
    assert "'output': '1\\n', 'expected': '0\\n'" in wrong_stdin  # its first test, n = 0


@pytest.mark.parametrize("language", ["cpp", "java"])
def test_tinker_cookbook_client_runs_a_compiled_language_with_files(
    tinker: dict[str, Any], server: tuple[str, str, list[str]], language: str
) -> None:
    skip_unless_offered(server[2], language)
    for name, printed in (("right", "42\n"), ("wrong", "43\n")):
        passed, response = tinker[f"{language} {name}"]
        assert passed is True, response  # the client's success: the program exited 0
        assert response["compile_result"]["return_code"] == 0, response
        assert response["run_result"]["stdout"] == printed, response


# --- SkyRL ----------------------------------------------------------------------------------

SKYRL_SCRIPT = r"""
import json, pathlib, site, sys, types

args = json.loads(sys.argv[1])
# The wheel's skyrl-agent/skyrl_agent, its package __init__s (SkyRL's trainer) left out.
root = pathlib.Path(site.getsitepackages()[0]) / "skyrl-agent" / "skyrl_agent"
for name in ("skyrl_agent", "skyrl_agent.tools", "skyrl_agent.tasks",
             "skyrl_agent.tasks.verifiers"):
    package = types.ModuleType(name)
    package.__path__ = [str(root.joinpath(*name.split(".")[1:]))]
    sys.modules[name] = package
from skyrl_agent.tools.sandbox_fusion import CodeInterpreter
from skyrl_agent.tasks.verifiers import coder1

out = {}
tool = CodeInterpreter()
for name, (language, code) in args["tool"].items():
    out[name] = tool.call(json.dumps({"code": code, "language": language}))
for name, (code, ground_truth) in args["verifier"].items():
    out[name] = coder1.compute_score("```python\n" + code + "```", json.dumps(ground_truth), {})
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def skyrl(server: tuple[str, str, list[str]]) -> dict[str, Any]:
    host, url, offered = server
    check = subprocess.run(
        [str(CLIENTS_PYTHON), "-c", "import importlib.metadata as m; m.version('skyrl')"],
        capture_output=True,
    )
    if check.returncode != 0:
        pytest.skip(
            "no SkyRL in .venv-clients: skyrl 0.4.0 needs Python 3.12+, and make setup "
            "found none on this machine (scripts/setup-clients-venv.sh)"
        )
    # The wrong one's last line is a bare expression: the tool prints it.
    tool = {"python right": ("python", "print(21 * 2)"), "python wrong": ("python", "21 * 2 + 1")}
    for language, source in (("cpp", CPP_PRINTS), ("java", JAVA_PRINTS)):
        if language in offered:
            tool[f"{language} right"] = (language, source % "2 * 21")
            tool[f"{language} wrong"] = (language, source % "2 * 21 + 1")
    stdin_tests = {"inputs": ["21\n", "5\n"], "outputs": ["42\n", "10\n"]}
    functional = {"functional": "assert Solution().add(2, 3) == 5\n"}
    args = {
        "tool": tool,
        "verifier": {
            "stdin right": (DOUBLE, stdin_tests),
            "stdin wrong": (OFF_BY_ONE, stdin_tests),
            "functional right": (ADD, functional),
            "functional wrong": (SUBTRACT, functional),
        },
    }
    env = {
        "SANDBOX_FUSION_URL": url,  # the tool's setting: it adds /run_code
        "CODER1_EXEC": "sandboxfusion",  # the verifier's backend, then its host name
        "SANDBOX_FUSION_SERVERS": host,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # litellm would fetch a price list on import
    }
    return run_client(SKYRL_SCRIPT, args, env)


@pytest.mark.parametrize("language", ["python", "cpp", "java"])
def test_skyrl_code_tool_returns_a_program_s_output(
    skyrl: dict[str, Any], server: tuple[str, str, list[str]], language: str
) -> None:
    skip_unless_offered(server[2], language)
    # The tool returns stdout + stderr ("no stdout here" when the run did not finish).
    assert skyrl[f"{language} right"] == "42\n", skyrl
    assert skyrl[f"{language} wrong"] == "43\n", skyrl


def test_skyrl_coder1_verifier_scores_right_and_wrong_on_port_8080(skyrl: dict[str, Any]) -> None:
    for kind in ("stdin", "functional"):
        assert skyrl[f"{kind} right"] == {"score": 1.0, "acc": 1.0}, kind
        assert skyrl[f"{kind} wrong"] == {"score": 0.0, "acc": 0.0}, kind
