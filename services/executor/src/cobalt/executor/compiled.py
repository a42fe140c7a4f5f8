"""A compiled or interpreted language's program in the sandbox: its build and its runs.

One request compiles once (`compile_job`, under `CompileLimits`, in a jail like a
test's); `read_build` turns what the sandbox observed into a `Build`: the files the runs
need, or a compile error with the compiler's messages, or a sandbox failure. Each stdin
test then runs `run_job_fields`: the build's files written into the test's fresh working
directory and the language's run command exec'd in place of the harness. Verdicts stay
the judge's (judge.py): a program's output is compared in the server as for Python.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import signal
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from cobalt.executor.judge import parse_record, sandbox_error
from cobalt.executor.languages import CompileLimits, Toolchain
from cobalt.executor.response_budget import ResponseBudget, truncate_to_json_bytes
from cobalt.executor.sandbox import RawRun, SandboxJob
from cobalt.executor.workfiles import WorkFile, check_file_name
from cobalt.shared.contracts import TestResult, Verdict
from cobalt.shared.contracts.executor import Compilation
from cobalt.shared.errors import InvalidInput
from cobalt.shared.text import truncate_middle

__all__ = [
    "Build",
    "capped_compilation",
    "BuildCache",
    "compile_error_result",
    "compile_job",
    "interpreted_build",
    "read_build",
    "run_job_fields",
]

EXECUTABLE = 0o755
SOURCE = 0o644


@dataclass(frozen=True)
class Build:
    """What a request's program became: the files its runs need, or why there are none."""

    toolchain: Toolchain | None = None
    """None: Python (runs in the zygote; `files` are only the request's own)."""
    files: tuple[WorkFile, ...] = ()
    compilation: Compilation | None = None
    """None for an interpreted language (nothing was compiled)."""
    failure: TestResult | None = None
    """Set when no test can run: a compile error, or the sandbox failed to compile."""


def source_file(toolchain: Toolchain, code: str) -> WorkFile:
    # Lone surrogates (valid in JSON, not in UTF-8) pass through as their raw code units.
    return (toolchain.language.source, code.encode("utf-8", "surrogatepass"), SOURCE)


def compile_job(
    toolchain: Toolchain, code: str, limits: CompileLimits, files: tuple[WorkFile, ...] = ()
) -> SandboxJob:
    """The one compilation of a request's program, in a jail of its own limits."""
    return SandboxJob(
        code="",
        mode="compile",
        argv=toolchain.compile,
        env=dict(toolchain.language.env),
        files=(*files, source_file(toolchain, code)),
        artifacts=toolchain.language.artifacts,
        wall_s=limits.wall_s,
        cpu_s=limits.wall_s,
        memory_mb=limits.memory_mb,
        output_bytes=limits.output_kb * 1024,
        record_bytes=(limits.artifact_mb << 20) * 4 // 3 + 65536,
        address_space_mb=toolchain.language.address_space_mb,
    )


def interpreted_build(toolchain: Toolchain, code: str, files: tuple[WorkFile, ...] = ()) -> Build:
    """An interpreted language's build: its source is what runs."""
    return Build(toolchain=toolchain, files=(*files, source_file(toolchain, code)))


def read_build(
    toolchain: Toolchain,
    raw: RawRun,
    job: SandboxJob,
    limits: CompileLimits,
    files: tuple[WorkFile, ...] = (),
) -> Build:
    """The build a compilation produced, judged from what the trusted side observed.

    The record is written by the harness after the compiler exited; the compiler never
    holds its pipe, and what it claims is only ever which files the runs get.
    """
    messages = _messages(raw, limits)
    wall_ms = round(raw.wall_ms, 3)
    if not raw.started:
        if raw.deadline_exceeded:
            return _failed(messages, wall_ms, f"compilation exceeded {job.wall_s:g} s")
        return Build(failure=sandbox_error("The sandbox failed before the compiler ran."))
    reason = ""
    if raw.memory_exceeded:
        reason = f"compilation exceeded its memory limit ({job.memory_mb} MiB)"
    elif raw.deadline_exceeded or raw.cpu_exceeded or raw.signal == signal.SIGXCPU:
        reason = f"compilation exceeded its time limit ({job.wall_s:g} s)"
    elif raw.output_exceeded:
        reason = f"the compiler's output exceeded {limits.output_kb} KiB"
    elif raw.slot_died:
        reason = "the compiler terminated its sandbox"
    elif raw.exit_code != 0:
        # The harness ends 0 whatever the compiler did; anything else is a compilation
        # stopped from outside (its request abandoned), never the source's verdict.
        reason = "the compilation was stopped before it finished"
    if reason:
        return _failed(messages, wall_ms, reason)
    record = parse_record(raw.record, raw.nonce, max_line=job.record_bytes)
    if record.status != "compiled" or raw.exit_code != 0:
        return _failed(messages, wall_ms, "")
    try:
        built = _artifacts((record.info or {}).get("files"), limits)
    except InvalidInput as exc:
        return _failed(messages, wall_ms, str(exc))
    if not built:
        return _failed(messages, wall_ms, "the compiler left no program to run")
    return Build(
        toolchain=toolchain,
        files=(*files, *built),
        compilation=Compilation(status="ok", output=messages, wall_ms=wall_ms),
    )


def _messages(raw: RawRun, limits: CompileLimits) -> str:
    text = (raw.stdout + raw.stderr).decode("utf-8", "replace")
    return truncate_middle(text, limits.output_kb * 1024)


def _artifacts(made: Any, limits: CompileLimits) -> tuple[WorkFile, ...]:
    if not isinstance(made, dict):
        return ()
    files: list[WorkFile] = []
    total = 0
    for name, contents in made.items():
        if not isinstance(name, str) or not isinstance(contents, str):
            raise InvalidInput("the compiler's output could not be read")
        check_file_name(name)
        try:
            data = base64.b64decode(contents, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise InvalidInput("the compiler's output could not be read") from exc
        total += len(data)
        if total > limits.artifact_mb << 20:
            raise InvalidInput(f"the compiled program is larger than {limits.artifact_mb} MiB")
        files.append((name, data, EXECUTABLE))
    return tuple(files)


def _failed(messages: str, wall_ms: float, reason: str) -> Build:
    compilation = Compilation(status="error", output=messages, wall_ms=wall_ms, reason=reason)
    return Build(compilation=compilation, failure=compile_error_result(compilation))


def compile_error_result(compilation: Compilation, feedback_chars: int = 400) -> TestResult:
    """Each test's result when its program did not compile (the messages once per test's
    feedback, middle-truncated; in full once, in the response's `compilation`)."""
    detail = compilation.reason or "the compiler reported errors"
    text = truncate_middle(compilation.output.strip(), feedback_chars)
    feedback = f"Compile error ({detail}):\n{text}".rstrip(":\n")
    return TestResult(verdict=Verdict.COMPILE_ERROR, feedback=feedback, stderr=text)


def run_job_fields(toolchain: Toolchain, build: Build, memory_mb: int) -> dict[str, Any]:
    """The `SandboxJob` fields of one test of a non-Python program."""
    argv = tuple(arg.replace("{memory_mb}", str(memory_mb)) for arg in toolchain.run)
    return {
        "code": "",
        "mode": "exec",
        "argv": argv,
        "env": dict(toolchain.language.env),
        "files": build.files,
        "address_space_mb": toolchain.language.address_space_mb,
    }


class BuildCache:
    """Recent builds by what they were built from (language, source, files), so that a
    program sent once per test (verl's way) compiles once, not once per request.

    Only what the source alone decides is kept: a successful build, or the compiler's
    own rejection; a compilation stopped by a limit (which load can cause) is not, nor a
    sandbox failure. Bounded by the bytes of the files held; least recently used first out.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._builds: OrderedDict[str, tuple[Build, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0

    @staticmethod
    def key(toolchain: Toolchain, code: str, files: tuple[WorkFile, ...]) -> str:
        digest = hashlib.sha256()
        for part in (toolchain.language.name, *toolchain.compile, code):
            digest.update(part.encode("utf-8", "surrogatepass") + b"\0")
        for name, contents, mode in files:
            digest.update(f"{name}\0{mode}\0{len(contents)}\0".encode("utf-8", "surrogatepass"))
            digest.update(contents)
        return digest.hexdigest()

    def get(self, key: str) -> Build | None:
        with self._lock:
            entry = self._builds.get(key)
            if entry is None:
                return None
            self._builds.move_to_end(key)
            self.hits += 1
            return entry[0]

    def put(self, key: str, build: Build) -> None:
        compilation = build.compilation
        if compilation is None or compilation.reason:
            return  # a sandbox failure, or stopped by a limit: not the source's doing
        size = sum(len(contents) for _, contents, _ in build.files) + len(compilation.output)
        if size > self.max_bytes:
            return
        with self._lock:
            if key in self._builds:
                return
            self._builds[key] = (build, size)
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, (_, dropped) = self._builds.popitem(last=False)
                self._bytes -= dropped


COMPILATION_SHARE = 4
"""A compilation's messages take at most 1/4 of its response's byte budget."""


def capped_compilation(
    compilation: Compilation | None, shares: ResponseBudget | None, tests: int
) -> Compilation | None:
    """The compilation with its messages cut to its share of the response's budget."""
    if compilation is None or shares is None:
        return compilation
    limit = shares.fair_share * tests // COMPILATION_SHARE
    output = truncate_to_json_bytes(compilation.output, limit)
    if output == compilation.output:
        return compilation
    return compilation.model_copy(update={"output": output})
