"""The pipes between the server and one running test, and the server's side of them.

Five pipes per test: the command (program, mode, limits, nonce) and stdin flow in;
stdout, stderr and the harness record flow out. `JobStreams` writes and drains them
without blocking, into bounded buffers, so a program that floods its output or never
reads its input can neither block the server nor grow its memory.
"""

from __future__ import annotations

import errno
import fcntl
import os
import select
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cobalt.executor.errors import FileDescriptorsExhausted

if TYPE_CHECKING:
    from cobalt.executor.sandbox import SandboxJob

__all__ = ["DEFAULT_STDERR_CAP", "JobPipes", "JobStreams"]

DEFAULT_STDERR_CAP = 64 * 1024
"""Bytes of stderr kept per test; more than `output_kb` is an output_limit verdict."""


@dataclass
class JobPipes:
    """The five pipes of one test. Parent ends are non-blocking."""

    cmd_r: int
    cmd_w: int
    stdin_r: int
    stdin_w: int
    stdout_r: int
    stdout_w: int
    stderr_r: int
    stderr_w: int
    result_r: int
    result_w: int
    closed: set[int] = field(default_factory=set, init=False)

    @classmethod
    def open(cls) -> JobPipes:
        """Open the five pipes, or none of them.

        Raises:
            FileDescriptorsExhausted: the process or system is out of file descriptors.
        """
        fds: list[int] = []
        try:
            for _ in range(5):
                fds += os.pipe()
        except OSError as exc:
            for fd in fds:
                os.close(fd)
            if exc.errno in (errno.EMFILE, errno.ENFILE):
                raise FileDescriptorsExhausted(
                    "the executor is out of file descriptors; retry shortly"
                ) from exc
            raise
        pipes = cls(*fds)
        for fd in (pipes.cmd_w, pipes.stdin_w, pipes.stdout_r, pipes.stderr_r, pipes.result_r):
            flags = fcntl.fcntl(fd, fcntl.F_GETFL)
            fcntl.fcntl(fd, fcntl.F_SETFL, flags | os.O_NONBLOCK)
        return pipes

    def child_ends(self) -> list[int]:
        return [self.cmd_r, self.stdin_r, self.stdout_w, self.stderr_w, self.result_w]

    def close_child_ends(self) -> None:
        for fd in self.child_ends():
            self._close(fd)

    def close(self, fd: int) -> None:
        self._close(fd)

    def close_all(self) -> None:
        for fd in (
            self.cmd_r,
            self.cmd_w,
            self.stdin_r,
            self.stdin_w,
            self.stdout_r,
            self.stdout_w,
            self.stderr_r,
            self.stderr_w,
            self.result_r,
            self.result_w,
        ):
            self._close(fd)

    def _close(self, fd: int) -> None:
        if fd not in self.closed:
            self.closed.add(fd)
            try:
                os.close(fd)
            except OSError:
                pass


class JobStreams:
    """The server's ends of one test's pipes: feeds the command and stdin, and drains
    stdout, stderr and the harness record into bounded buffers (a flood sets `overflowed`
    instead of growing memory or blocking the program)."""

    def __init__(self, pipes: JobPipes, command: bytes, job: SandboxJob) -> None:
        self.pipes = pipes
        self.pending = {pipes.cmd_w: memoryview(command), pipes.stdin_w: memoryview(job.stdin)}
        self.buffers = {fd: bytearray() for fd in (pipes.stdout_r, pipes.stderr_r, pipes.result_r)}
        # Bytes allowed before the test is stopped, and bytes kept for the response.
        self.caps = {
            pipes.stdout_r: job.output_bytes,
            pipes.stderr_r: job.output_bytes,
            pipes.result_r: job.record_bytes or job.output_bytes + 4096,
        }
        self.kept = {**self.caps, pipes.stderr_r: DEFAULT_STDERR_CAP}
        self.seen = dict.fromkeys(self.buffers, 0)
        self.open_reads = set(self.buffers)
        self.overflowed = False
        self.poller = select.poll()
        for fd in self.pending:
            self.poller.register(fd, select.POLLOUT)
        for fd in self.open_reads:
            self.poller.register(fd, select.POLLIN)

    @property
    def drained(self) -> bool:
        return not self.open_reads

    def handle(self, fd: int, event: int) -> None:
        if fd in self.pending:
            self._write(fd, event)
        elif fd in self.open_reads:
            self._read(fd)

    def outputs(self) -> tuple[bytes, bytes, bytes]:
        p = self.pipes
        return (
            bytes(self.buffers[p.stdout_r]),
            bytes(self.buffers[p.stderr_r]),
            bytes(self.buffers[p.result_r]),
        )

    def _write(self, fd: int, event: int) -> None:
        view = self.pending[fd]
        if not event & (select.POLLERR | select.POLLHUP):
            try:
                view = view[os.write(fd, view[: 1 << 16]) :]
            except BlockingIOError:
                return
            except OSError:
                view = view[:0]  # the program closed its end: drop the rest of its input
        self.pending[fd] = view
        if not view or event & (select.POLLERR | select.POLLHUP):
            self.poller.unregister(fd)
            del self.pending[fd]
            self.pipes.close(fd)

    def _read(self, fd: int) -> None:
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return
        if not chunk:
            self.poller.unregister(fd)
            self.open_reads.discard(fd)
            return
        self.seen[fd] += len(chunk)
        room = self.kept[fd] - len(self.buffers[fd])
        if room > 0:
            self.buffers[fd] += chunk[:room]
        if self.seen[fd] > self.caps[fd]:
            self.overflowed = True
