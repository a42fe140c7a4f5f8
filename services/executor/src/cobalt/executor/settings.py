"""Executor settings, read from `COBALT_EXECUTOR_*` environment variables."""

from __future__ import annotations

import os

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import SettingsConfigDict

from cobalt.executor.cgroups import CgroupMode
from cobalt.executor.sandbox import SandboxConfig
from cobalt.shared.settings import CobaltSettings

__all__ = ["ExecutorSettings"]


class ExecutorSettings(CobaltSettings):
    """Everything the executor service can be told. Built once by the entry point."""

    model_config = SettingsConfigDict(env_prefix="COBALT_EXECUTOR_", frozen=True, extra="ignore")

    host: str = "127.0.0.1"
    """Address to listen on; localhost by default, so exposing it is a decision."""
    port: int = 8100
    auth_token: SecretStr | None = None
    """If set, /v1/* and /run_code need `Authorization: Bearer <token>`."""
    slots: int = Field(default_factory=lambda: os.cpu_count() or 1, ge=1, le=1024)
    """Concurrent sandboxes (tests running at once). Default: one per CPU."""
    max_pending_tests: int = Field(default=4096, ge=1)
    """Tests queued or running before new work is refused with 429."""
    max_pending_bytes: int = Field(default=512 << 20, ge=1 << 20)
    """Bytes of programs and test data held (queued or running) before new work gets 429."""
    max_body_bytes: int = Field(default=32 << 20, ge=1024)
    """Largest request body accepted; larger gets 413."""
    max_response_bytes: int = Field(default=32 << 20, ge=1024)
    """Bytes of program-sized text (stdout, stderr, feedback) in one response, counted as
    sent (JSON-escaped, UTF-8) and applied as each test finishes; longer fields are
    shortened. (Before 2026-11: MAX_RESPONSE_CHARS, in characters; that name is gone.)"""
    header_timeout_s: float = Field(default=10.0, gt=0)
    """A connection that has not sent a request's headers this long after opening (or
    after its last response) is closed: slowloris clients cannot hold connections."""
    body_timeout_s: float = Field(default=30.0, gt=0)
    """Longest wait for the next piece of a request body (408 after it)."""
    body_deadline_s: float = Field(default=120.0, gt=0)
    """The whole request body must arrive within this many seconds of the request's head
    (408 after it), however steadily it drips."""
    run_code_queue_wait_s: float = Field(default=10.0, ge=0, le=600)
    """How long `/run_code` holds a request while the queue is full before it answers 504
    with Retry-After (the status SandboxFusion's clients retry; verl scores a 429 as a
    failed program). 10 s fits verl's own deadline (compile + run timeout + 10 s)."""
    judge0_max_submissions: int = Field(default=1000, ge=1)
    """Judge0 submissions held at once (queued, running, or finished and not expired);
    past it new ones get 503 with Retry-After."""
    judge0_result_ttl_s: float = Field(default=3600.0, gt=0)
    """How long a finished Judge0 submission's result is kept for `GET /submissions/<token>`."""
    max_tests_per_request: int = Field(default=2000, ge=1)
    max_wall_s: float = Field(default=60.0, gt=0)
    """Highest per-test wall-clock limit a request may ask for."""
    max_memory_mb: int = Field(default=4096, ge=16)
    max_output_kb: int = Field(default=16384, ge=1)
    max_total_s: float = Field(default=600.0, gt=0)
    python: str = "/usr/bin/python3"
    """Interpreter that runs untrusted code (never a pyenv shim)."""
    sandbox_uid_base: int = Field(default=61000, ge=1000)
    """Slot i runs as uid base+i when the server is root; otherwise as the server's uid."""
    tmpfs_mb: int = Field(default=64, ge=1)
    """Size of each sandbox's writable /tmp and /dev/shm."""
    nproc: int = Field(default=64, ge=4)
    """Processes and threads one test may have at once."""
    nofile: int = Field(default=256, ge=16)
    file_size_mb: int = Field(default=64, ge=1)
    cgroups: CgroupMode = "auto"
    """Per-slot cgroups (memory with kernel memory, pids): `auto` uses them where the host
    allows (root with cgroup v1, or a delegated subtree) and warns otherwise, `required`
    refuses to start without them, `off` never uses them. See docs/executor.md."""
    unsafe_no_sandbox: bool = False
    """Run without bubblewrap (rlimits and seccomp only). Never for untrusted code."""
    languages: str = "all"
    """Languages offered besides Python: `all` whose toolchain is installed, or a
    comma-separated list (`python`: a Python-only executor). See docs/executor.md."""
    compile_wall_s: float = Field(default=30.0, gt=0, le=600)
    """Wall-clock limit of one compilation (compiled languages compile once per request)."""
    compile_memory_mb: int = Field(default=2048, ge=64)
    """Memory limit of one compilation (a compiler's own data and the jail's files)."""
    compile_output_kb: int = Field(default=1024, ge=1)
    """Compiler messages allowed; past it the compiler is stopped (a compile error)."""
    build_cache_mb: int = Field(default=256, ge=0)
    """Recent builds of compiled programs kept, so the same program sent again (one
    request per test) is not compiled again; 0 turns it off."""
    max_files_kb: int = Field(default=16384, ge=0)
    """Total decoded size of a /run_code request's `files` (SandboxFusion's field)."""
    python_packages: str = ""
    """A directory of third-party packages Python programs may import, bound read-only in
    every jail (e.g. /usr/lib/python3/dist-packages with Debian's python3-numpy,
    python3-pandas and python3-sympy); empty: the standard library only."""
    python_preload: str = ""
    """Comma-separated modules of that set the zygote imports once, so tests importing
    them pay nothing (costs memory per slot; see docs/executor.md)."""
    readiness_timeout_s: float = Field(default=10.0, gt=0)
    """How long the readiness canary may take on an idle executor before it counts as broken."""
    readiness_interval_s: float = Field(default=10.0, gt=0)
    """The canary runs when no test has finished for this long (real tests are evidence)."""

    @model_validator(mode="after")
    def _sane(self) -> ExecutorSettings:
        if self.python.find("/.pyenv/shims/") >= 0:
            raise ValueError("COBALT_EXECUTOR_PYTHON must not be a pyenv shim")
        if self.python_packages and not os.path.isdir(self.python_packages):
            raise ValueError(
                f"COBALT_EXECUTOR_PYTHON_PACKAGES={self.python_packages!r} is not a directory"
            )
        if self.python_packages and not os.path.isabs(self.python_packages):
            raise ValueError("COBALT_EXECUTOR_PYTHON_PACKAGES must be an absolute path")
        return self

    def sandbox_config(self) -> SandboxConfig:
        """The part of these settings the sandbox layer needs."""
        return SandboxConfig(
            python=self.python,
            use_bwrap=not self.unsafe_no_sandbox,
            uid_base=self.sandbox_uid_base,
            slots=self.slots,
            tmpfs_mb=self.tmpfs_mb,
            nproc=self.nproc,
            nofile=self.nofile,
            file_size_mb=self.file_size_mb,
            cgroups=self.cgroups,
            languages=self.languages,
            python_packages=self.python_packages,
            python_preload=tuple(filter(None, (m.strip() for m in self.python_preload.split(",")))),
        )
