"""The checkpoint volume refusing writes (full, read-only, over quota, no permission): how
the trainer tells that from a bug in its own code, and how it waits it out.

Why it waits. A full or read-only volume is an operator's fault that an operator fixes
(delete old runs, grow the volume, remount it): the trainer keeps the step it has trained
in memory, tries the write again, backing off up to `_MAX_DELAY_S`, and goes on when the
write succeeds. Only after `COBALT_TRAINER_CHECKPOINT_OUTAGE_S` does it give up, with
`CheckpointVolumeError`: `cobalt trainer serve` exits 1 with the volume, the reason and
what to do, and a trainer started again after the fix resumes from the newest complete
resume state (loop.py: exactly once holds across that).

Why it probes. The writers do not agree on how a refused write looks: safetensors (the
policy weights) raises its own error with the OS's message in its text, torch.save (the
resume state) a RuntimeError that says only "file write failed", json and shutil an
OSError. So a failed write is a volume refusal when an OSError of the refusing kinds is in
its chain, when its text carries one of their messages, or when the volume, asked
directly, refuses too (read-only in statvfs, or a small probe file that cannot be
written). The probe runs before the write's partial output is deleted: a write that filled
the volume leaves it full until then. Any other error is re-raised at once: retrying a
bug for minutes would only hide it.
"""

from __future__ import annotations

import errno
import logging
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from cobalt.shared.errors import CobaltError

__all__ = ["CheckpointVolumeError", "volume_refusal", "write_patiently"]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

REFUSING_ERRNOS = (
    errno.ENOSPC,  # full
    errno.EDQUOT,  # over quota
    errno.EFBIG,  # over a file-size limit
    errno.EROFS,  # mounted read-only
    errno.EACCES,  # no permission
    errno.EPERM,
)
_FIRST_DELAY_S = 0.5
_MAX_DELAY_S = 30.0
_PROBE_BYTES = 64 * 1024
"""What the probe writes: larger than the few bytes a nearly full volume still takes."""


class CheckpointVolumeError(CobaltError):
    """The checkpoint volume refused a write for longer than the trainer waits."""

    def __init__(self, directory: Path, reason: str, what: str, waited_s: float) -> None:
        super().__init__(
            f"the checkpoint volume at {directory} refused to take {what} for "
            f"{waited_s:.0f} s ({reason}); free space on it or make it writable, then start "
            "the trainer again: it resumes from the newest complete resume state "
            "(COBALT_TRAINER_CHECKPOINT_OUTAGE_S sets how long it waits)"
        )
        self.directory = directory
        self.reason = reason


def _chain(error: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _existing(directory: Path) -> Path:
    """`directory`, or its nearest ancestor that exists (the write may have failed to
    create it)."""
    for candidate in (directory, *directory.parents):
        if candidate.is_dir():
            return candidate
    return Path("/")


def _probe(directory: Path) -> str | None:
    """Why the volume under `directory` refuses writes now, or None if it takes them."""
    where = _existing(directory)
    try:
        if os.statvfs(where).f_flag & os.ST_RDONLY:
            return os.strerror(errno.EROFS)
    except OSError as exc:
        return exc.strerror or str(exc)
    probe = where / f".cobalt-volume-probe-{os.getpid()}"
    try:
        with probe.open("wb") as out:
            out.write(b"\0" * _PROBE_BYTES)
            out.flush()
            os.fsync(out.fileno())  # tmpfs and most disks refuse at write; some only here
    except OSError as exc:
        return exc.strerror or str(exc)
    finally:
        probe.unlink(missing_ok=True)
    return None


def volume_refusal(error: BaseException, directory: Path) -> str | None:
    """The reason (the OS's message, e.g. "No space left on device") when `error`, raised
    by a write under `directory`, is the volume refusing it; None when it is something
    else."""
    messages = {os.strerror(code): code for code in REFUSING_ERRNOS}
    for link in _chain(error):
        if isinstance(link, OSError) and link.errno in REFUSING_ERRNOS:
            return os.strerror(link.errno)
        for message in messages:
            if message in str(link):
                return message
    return _probe(directory)


def write_patiently(
    write: Callable[[], _T],
    *,
    directory: Path,
    outage_s: float,
    what: str,
    clean_up: Callable[[], None],
) -> _T:
    """`write()`, tried again while the volume under `directory` refuses it, for up to
    `outage_s` from the first refusal. `clean_up` deletes a failed try's partial output
    (after the probe). `what` names the write in log lines and the error.

    Raises:
        CheckpointVolumeError: the volume refused for longer than `outage_s`.
        Exception: whatever `write` raised for another reason, at once.
    """
    first_refusal: float | None = None
    delay = _FIRST_DELAY_S
    while True:
        try:
            return write()
        except Exception as exc:
            reason = volume_refusal(exc, directory)
            clean_up()
            if reason is None:
                raise
            now = time.monotonic()
            if first_refusal is None:
                first_refusal = now
            left = first_refusal + outage_s - now
            if left <= 0:
                raise CheckpointVolumeError(directory, reason, what, now - first_refusal) from exc
            logger.warning(
                "the checkpoint volume at %s refuses %s (%s); trying again for %.0f s more",
                directory,
                what,
                reason,
                left,
            )
            time.sleep(min(delay, left))
            delay = min(2 * delay, _MAX_DELAY_S)
