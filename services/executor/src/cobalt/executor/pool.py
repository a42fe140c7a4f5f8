"""The pool of sandbox slots that all requests share.

A fixed number of jails (one per CPU by default) run one test each at a time; a test
waits for a free slot in FIFO order. Slots that died or wore out are restarted on use.

A slot whose jail did not reset after a test, or whose test harness failed to start, is
restarted at once and the test retried there: whatever broke it meets no other test.
A slot whose fresh jails fail `RETIRE_AFTER_FAILURES` times in a row is retired: it takes
no tests, and a background thread starts and probes replacement jails (backing off) until
one works. `slots_working` tells readiness how much of the pool still works.
"""

from __future__ import annotations

import logging
import os
import queue
import resource
import threading
from dataclasses import replace

from cobalt.executor.cgroups import SlotCgroups, open_slot_cgroups
from cobalt.executor.errors import SandboxUnavailable, UnsupportedFeature
from cobalt.executor.interpreter import describe_interpreter
from cobalt.executor.languages import offered_toolchains, toolchain_binds
from cobalt.executor.sandbox import RawRun, SandboxConfig, SandboxJob, SandboxSlot
from cobalt.executor.seccomp import per_test_seccomp_bpf, seccomp_bpf

__all__ = ["RETIRE_AFTER_FAILURES", "SandboxPool", "shared_uid_pipe_budget"]

logger = logging.getLogger(__name__)

RETIRE_AFTER_FAILURES = 3
"""Failed harness starts in a row (every retry on a fresh jail) after which a slot is retired."""
REPLACE_BACKOFF_S = (0.5, 30.0)
"""First and longest wait between attempts to bring a retired slot back."""
PROBE = SandboxJob(code="print(6 * 7)\n", mode="stdin", wall_s=10.0, cpu_s=5.0, memory_mb=256)
"""What a replacement jail must run correctly before it takes tests again."""


def _check_enforceable(config: SandboxConfig) -> None:
    """Refuse to start when a configured per-test limit cannot be set.

    A test's harness lowers its rlimits to the configured values; it can never raise one
    above the hard limit the server inherited, and would then fail every test.

    Raises:
        SandboxUnavailable: a configured limit is above the server's hard limit.
    """
    wanted = [
        (resource.RLIMIT_NOFILE, config.nofile, "NOFILE", "ulimit -Hn"),
        (resource.RLIMIT_NPROC, config.nproc, "NPROC", "ulimit -Hu"),
        (resource.RLIMIT_FSIZE, config.file_size_mb << 20, "FILE_SIZE_MB", "ulimit -Hf"),
    ]
    for limit, value, setting, shell in wanted:
        hard = resource.getrlimit(limit)[1]
        if hard != resource.RLIM_INFINITY and value > hard:
            raise SandboxUnavailable(
                f"COBALT_EXECUTOR_{setting} cannot be enforced: it asks for {value}, above "
                f"this process's hard limit of {hard}; lower the setting or raise the limit "
                f"({shell}, or the container runtime's ulimits)"
            )


PIPE_QUOTA = "/proc/sys/fs/pipe-user-pages-soft"
PIPE_PAGES = 16
"""Pages a pipe holds by default (64 KiB); tests supervised for pipes cannot grow one."""


def shared_uid_pipe_budget(slots: int, *, shared_uid: bool | None = None) -> int:
    """Pipes one test may create when every slot runs as the server's uid (0: no bound).

    That uid's pipe quota is shared by all slots and the server; each test gets an equal
    share of it after the server's own (five pipes per running test) and a margin, so no
    test can push the uid over it and shrink a neighbour's pipes. As root each slot has
    its own uid (and quota), and a quota of 0 means none: no bound then.
    """
    if not (os.geteuid() != 0 if shared_uid is None else shared_uid):
        return 0
    try:
        with open(PIPE_QUOTA) as quota:
            pages = int(quota.read())
    except (OSError, ValueError):
        return 0
    if pages <= 0:
        return 0
    reserved = 8 * slots + 64
    return max(16, (pages // PIPE_PAGES - reserved) // slots)


class SandboxPool:
    """A fixed set of slots shared by all requests; `run` blocks until a slot is free.

    Thread-safe. Dead or worn-out slots are restarted on their next use.
    """

    def __init__(self, config: SandboxConfig) -> None:
        if config.uid_base <= 0 and os.geteuid() == 0:
            raise SandboxUnavailable("refusing to run sandboxes as root: set a positive uid base")
        self.config = config
        try:
            self.toolchains = offered_toolchains(config.languages)
        except UnsupportedFeature as exc:
            raise SandboxUnavailable(f"COBALT_EXECUTOR_LANGUAGES: {exc}") from exc
        """Languages besides Python this pool runs; their toolchains are bound in every jail."""
        self.interpreter = replace(
            describe_interpreter(config.python),
            toolchain_binds=toolchain_binds(self.toolchains),
        )
        _check_enforceable(config)
        self._seccomp = seccomp_bpf()
        self.pipe_budget = shared_uid_pipe_budget(config.slots)
        test_filter = per_test_seccomp_bpf(supervise_pipes=self.pipe_budget > 0)
        self.cgroups = SlotCgroups(version=None, reason="the pool has not started")
        self.slots = [
            SandboxSlot(
                index=i,
                config=config,
                interpreter=self.interpreter,
                seccomp=self._seccomp,
                test_filter=test_filter,
                pipe_budget=self.pipe_budget,
            )
            for i in range(config.slots)
        ]
        self._idle: queue.Queue[SandboxSlot] = queue.Queue()
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self.busy = 0
        self.restarts = 0
        self.retired: set[int] = set()
        """Indices of slots out of service until a replacement jail works."""
        self._failures = [0] * config.slots

    def start(self) -> None:
        """Start every slot now, so the first request pays no start-up.

        Raises:
            SandboxUnavailable: a slot could not start (bubblewrap missing or broken), or
                `COBALT_EXECUTOR_CGROUPS=required` and this host offers no usable cgroups.
        """
        # Made at start, not construction: a pool that never starts leaves nothing behind.
        self.cgroups = open_slot_cgroups(self.config.cgroups, len(self.slots), self.config.nproc)
        for slot, cgroup in zip(self.slots, self.cgroups.slots, strict=False):
            slot.cgroup = cgroup
        try:
            for slot in self.slots:
                slot.start()
                self._idle.put(slot)
        except BaseException:
            self.close()  # the jails started so far, and the slots' cgroups
            raise
        if not self.config.use_bwrap:
            logger.critical(
                "UNSAFE: running untrusted code WITHOUT bubblewrap (no namespaces, host "
                "filesystem and network visible); only rlimits and seccomp apply"
            )
        logger.info(
            "sandbox pool ready: %d slots, python %s (%s), bwrap=%s, %s",
            len(self.slots),
            self.interpreter.version,
            self.interpreter.path,
            self.config.use_bwrap,
            self.cgroups.describe(),
        )

    def run(self, job: SandboxJob) -> RawRun:
        """Run a job on the next free slot.

        A harness that never started (the jail broke before any untrusted code ran) is no
        verdict on the program: the slot is restarted at once and the job retried there.
        """
        slot = self._next_idle()
        if slot is None:
            return RawRun(nonce="", slot_died=True)  # every slot is retired
        with self._lock:
            self.busy += 1
        try:
            raw = self._run_on(slot, job)
            if _harness_failed(raw):
                logger.warning("slot %d failed before the test started; retrying", slot.index)
                self._note_failure(slot)
                raw = self._run_on(slot, job)
            if _harness_failed(raw):
                self._note_failure(slot)
            else:
                self._failures[slot.index] = 0
            return raw
        finally:
            with self._lock:
                self.busy -= 1
            if slot.index in self.retired:
                threading.Thread(
                    target=self._replace,
                    args=(slot,),
                    name=f"replace-slot-{slot.index}",
                    daemon=True,
                ).start()
            else:
                self._idle.put(slot)

    def _next_idle(self) -> SandboxSlot | None:
        while True:
            try:
                return self._idle.get(timeout=0.5)
            except queue.Empty:
                if len(self.retired) == len(self.slots):
                    return None

    def _note_failure(self, slot: SandboxSlot) -> None:
        slot.close()  # restarted at once, on the next attempt: nothing of this jail is kept
        self._failures[slot.index] += 1
        if self._failures[slot.index] >= RETIRE_AFTER_FAILURES:
            logger.error(
                "slot %d: the test harness failed to start on %d fresh jails in a row; "
                "retiring it until a replacement works",
                slot.index,
                self._failures[slot.index],
            )
            with self._lock:
                self.retired.add(slot.index)

    def _replace(self, slot: SandboxSlot) -> None:
        """Bring a retired slot back once a fresh jail runs the probe correctly."""
        wait_s, longest_s = REPLACE_BACKOFF_S
        while not self._closed.wait(wait_s):
            raw = self._run_on(slot, PROBE)
            if self._closed.is_set():
                slot.close()
                return
            if raw.started and raw.exit_code == 0 and raw.stdout == b"42\n":
                logger.info("slot %d: replacement jail works; back in service", slot.index)
                self._failures[slot.index] = 0
                with self._lock:
                    self.retired.discard(slot.index)
                self._idle.put(slot)
                return
            slot.close()
            wait_s = min(wait_s * 2, longest_s)

    def slots_working(self) -> tuple[int, int]:
        """How many slots are in service (not retired), and how many there are."""
        return len(self.slots) - len(self.retired), len(self.slots)

    def _run_on(self, slot: SandboxSlot, job: SandboxJob) -> RawRun:
        if not slot.is_alive():
            with self._lock:
                self.restarts += 1
            try:
                slot.start()
            except SandboxUnavailable:
                logger.exception("slot %d could not restart", slot.index)
                return RawRun(nonce="", slot_died=True)
        return slot.run(job)

    def live_pids(self) -> set[int]:
        """Host pids of the jails (bwrap processes) currently running."""
        return {slot.pid for slot in self.slots if slot.pid is not None and slot.is_alive()}

    def sandbox_uids(self) -> set[int]:
        """The uids jails run as (empty when the server is not root and keeps its own)."""
        return {slot.uid for slot in self.slots if slot.uid is not None}

    def close(self) -> None:
        self._closed.set()
        for slot in self.slots:
            slot.close()
        self.cgroups.close()


def _harness_failed(raw: RawRun) -> bool:
    """No untrusted code ran, and no limit of the test stopped it: the jail's fault."""
    limited = raw.deadline_exceeded or raw.memory_exceeded or raw.cpu_exceeded
    return not raw.started and not (limited or raw.output_exceeded)
