"""The seccomp filter every sandboxed process runs under.

Default allow, with the system calls that judged programs never need answered by an error
(not a kill, so that a library probing for a feature fails cleanly). The filter is
compiled to BPF once with libseccomp (through pyseccomp) and handed to bubblewrap, which
installs it after building the namespaces, so it covers the zygote and every test.
"""

from __future__ import annotations

import errno
import os
import socket

import pyseccomp

__all__ = [
    "DENIED_SYSCALLS",
    "TEST_DENIED_SYSCALLS",
    "build_filter",
    "build_test_filter",
    "seccomp_bpf",
    "seccomp_memfd",
    "per_test_seccomp_bpf",
]

DENIED_SYSCALLS: tuple[str, ...] = (
    # Debugging and reading or writing other processes' memory.
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_getfd",
    # Namespaces, mounts and the filesystem tree.
    "unshare",
    "setns",
    "pivot_root",
    "chroot",
    "mount_setattr",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "open_by_handle_at",
    "name_to_handle_at",
    # Kernel attack surface with a history of exploits.
    "bpf",
    "userfaultfd",
    "perf_event_open",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "keyctl",
    "add_key",
    "request_key",
    "fanotify_init",
    "lookup_dcookie",
    # Whole-machine operations.
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "quotactl",
    "syslog",
    "vhangup",
    "personality",
    # Memory outside the address-space limit, and IPC objects that would outlive a test
    # (the IPC namespace lives as long as the jail). /dev/shm files remain for
    # multiprocessing; that tmpfs is size-capped and wiped after every test.
    "memfd_create",
    "memfd_secret",
    "shmget",
    "shmat",
    "msgget",
    "semget",
    "mq_open",
)

_MS_NOSUID_NODEV = 2 | 4
_MNT_DETACH = 2
_CLONE_NAMESPACE_FLAGS = (
    0x00020000,  # CLONE_NEWNS
    0x02000000,  # CLONE_NEWCGROUP
    0x04000000,  # CLONE_NEWUTS
    0x08000000,  # CLONE_NEWIPC
    0x10000000,  # CLONE_NEWUSER
    0x20000000,  # CLONE_NEWPID
    0x40000000,  # CLONE_NEWNET
)


def _denying(names: tuple[str, ...]) -> pyseccomp.SyscallFilter:
    """A default-allow filter where each of `names` fails with EPERM."""
    rules = pyseccomp.SyscallFilter(defaction=pyseccomp.ALLOW)
    for name in names:
        try:
            rules.add_rule(pyseccomp.ERRNO(errno.EPERM), name)
        except (RuntimeError, ValueError, OSError):
            # A name this libseccomp or architecture does not know cannot be called anyway.
            continue
    return rules


def build_filter() -> pyseccomp.SyscallFilter:
    """Build the filter object (not yet loaded into any process)."""
    rules = _denying(DENIED_SYSCALLS)
    # Only local (AF_UNIX) sockets: no TCP, UDP, raw, netlink, packet or vsock sockets.
    for call in ("socket", "socketpair"):
        rules.add_rule(
            pyseccomp.ERRNO(errno.EAFNOSUPPORT),
            call,
            pyseccomp.Arg(0, pyseccomp.NE, socket.AF_UNIX),
        )
    # Limits of other processes (the zygote's, say) are not a test's business: setrlimit
    # in glibc is prlimit64 on pid 0, which stays allowed.
    rules.add_rule(pyseccomp.ERRNO(errno.EPERM), "prlimit64", pyseccomp.Arg(0, pyseccomp.NE, 0))
    # clone3 takes its flags through a pointer seccomp cannot read; glibc falls back to
    # clone, whose flags we can check, when clone3 reports ENOSYS.
    rules.add_rule(pyseccomp.ERRNO(errno.ENOSYS), "clone3")
    # The zygote replaces the jail's tmpfs mounts after each test (a lazy unmount, then a
    # nosuid,nodev mount); no other mount or unmount is allowed, and tests get neither
    # (TEST_DENIED_SYSCALLS).
    rules.add_rule(
        pyseccomp.ERRNO(errno.EPERM), "mount", pyseccomp.Arg(3, pyseccomp.NE, _MS_NOSUID_NODEV)
    )
    rules.add_rule(
        pyseccomp.ERRNO(errno.EPERM), "umount2", pyseccomp.Arg(1, pyseccomp.NE, _MNT_DETACH)
    )
    # No new namespaces from inside: each flag is checked on its own (MASKED_EQ).
    for flag in _CLONE_NAMESPACE_FLAGS:
        rules.add_rule(
            pyseccomp.ERRNO(errno.EPERM), "clone", pyseccomp.Arg(0, pyseccomp.MASKED_EQ, flag, flag)
        )
    return rules


TEST_DENIED_SYSCALLS: tuple[str, ...] = (
    # A new session per child would give each its own scheduler autogroup: 40 of them
    # would take 40 shares of the CPU from a neighbouring slot's single one.
    "setsid",
    # Watching the read-only stdlib would show which modules other slots import.
    "inotify_init",
    "inotify_init1",
    "inotify_add_watch",
    # The zygote replaces the jail's tmpfs mounts; a test holds no capability to mount,
    # and this keeps it so even if one ever did.
    "mount",
    "umount2",
    # Kernel quotas and objects slots share (issue 48): a FIFO takes pipe pages from the
    # uid's quota outside the pipe budget (no device can be made anyway), and a flock on a
    # shared read-only file (the stdlib) is a covert channel between slots.
    "mknod",
    "mknodat",
    "flock",
    # The host's process count and free memory: how busy the other slots are.
    "sysinfo",
)
"""Denied to tests only (the zygote itself calls setsid for each test), by a second
filter the test's harness stacks on itself before any untrusted code runs."""


F_SETPIPE_SZ = 1031
F_NOTIFY = 1026
"""dnotify: watching a shared read-only directory shows what other slots open there."""
LOCK_QUERIES = (5, 36)
"""F_GETLK and F_OFD_GETLK: asking whether a shared read-only file is read-locked would
read what another slot signals with its read locks (setting them stays allowed: read locks
never conflict with each other, and no test can open a shared file for writing)."""
FD_PASSING_SYSCALLS = ("sendmsg", "sendmmsg")
"""How a test could put file descriptors in flight (SCM_RIGHTS): the in-flight count is
the uid's, shared by slots that share a uid, so a test holding hundreds would make a
neighbour's fd passing fail (ETOOMANYREFS). Denied from the handover on (below)."""
DEFAULT_PIPE_BYTES = 65536
SUPERVISED_SYSCALLS = ("pipe", "pipe2")
"""With `supervise_pipes`, calls the zygote answers (it counts them against the test's
pipe budget; see `_zygote.py`) instead of the kernel alone."""


def build_test_filter(*, supervise_pipes: bool = False) -> pyseccomp.SyscallFilter:
    """The per-test filter: default allow, TEST_DENIED_SYSCALLS fail with EPERM.

    With `supervise_pipes` (slots that share one host uid, and so its pipe quota), every
    pipe a test creates waits for the zygote's yes (a seccomp user notification), and no
    pipe may grow beyond the default 64 KiB: each then costs a known share of the quota.
    """
    rules = _denying(TEST_DENIED_SYSCALLS)
    for command in (F_NOTIFY, *LOCK_QUERIES):
        rules.add_rule(
            pyseccomp.ERRNO(errno.EPERM), "fcntl", pyseccomp.Arg(1, pyseccomp.EQ, command)
        )
    if supervise_pipes:
        for name in SUPERVISED_SYSCALLS:
            rules.add_rule(pyseccomp.NOTIFY, name)
        rules.add_rule(
            pyseccomp.ERRNO(errno.EPERM),
            "fcntl",
            pyseccomp.Arg(1, pyseccomp.EQ, F_SETPIPE_SZ),
            pyseccomp.Arg(2, pyseccomp.GT, DEFAULT_PIPE_BYTES),
        )
    return rules


def build_handover_filter() -> pyseccomp.SyscallFilter:
    """The filter a test's process stacks once it has handed its notification fd to the
    zygote (an fd it passes with sendmsg): from then on no fd passing."""
    return _denying(FD_PASSING_SYSCALLS)


def per_test_seccomp_bpf(*, supervise_pipes: bool = False) -> bytes:
    """The per-test filters as raw BPF (the harness installs them with seccomp(2)): the
    test filter's length (4 bytes, little-endian), the test filter, the handover filter."""
    test = _export(build_test_filter(supervise_pipes=supervise_pipes))
    return len(test).to_bytes(4, "little") + test + _export(build_handover_filter())


def seccomp_bpf() -> bytes:
    """The compiled BPF program, as bubblewrap's `--seccomp FD` expects it."""
    return _export(build_filter())


def _export(rules: pyseccomp.SyscallFilter) -> bytes:
    fd = os.memfd_create("cobalt-seccomp", 0)
    try:
        with open(fd, "wb", closefd=False) as sink:
            rules.export_bpf(sink)
        os.lseek(fd, 0, os.SEEK_SET)
        return os.read(fd, 1 << 20)
    finally:
        os.close(fd)


def seccomp_memfd(program: bytes) -> int:
    """A readable file descriptor holding `program`, positioned at its start."""
    fd = os.memfd_create("cobalt-seccomp", 0)
    os.write(fd, program)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
