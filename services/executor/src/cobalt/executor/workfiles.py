"""Files a request puts in its program's working directory (SandboxFusion's `files`).

The client sends base64 contents by relative path; each path is checked here (no
absolute path, no `..`, no empty or odd component, nothing but printable names) and the
total size is capped before anything reaches a sandbox, so a bad name or an oversized
upload is a 422 naming the file, never a write outside the test's directory.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping

from cobalt.shared.errors import InvalidInput

__all__ = [
    "FETCH_FILES_REFUSED",
    "MAX_FILE_PATH_CHARS",
    "WorkFile",
    "check_file_name",
    "decode_files",
]

WorkFile = tuple[str, bytes, int]
"""(relative path, contents, permission bits), as `SandboxJob.files` takes them."""

MAX_FILE_PATH_CHARS = 255
MAX_PATH_DEPTH = 8
FETCH_FILES_REFUSED = (
    "fetch_files is not supported: the sandbox has no network and no files outlive a "
    "run; read what the program prints instead (stdout and stderr are returned)"
)


def check_file_name(name: str, reserved: tuple[str, ...] = ()) -> str:
    """`name` if it is a safe relative path inside the working directory.

    Raises:
        InvalidInput: an absolute path, `..`, an empty or hidden-dot component, a control
            character, too long or too deep, or a name the language itself uses.
    """
    shown = repr(name[:80])
    if not name or len(name) > MAX_FILE_PATH_CHARS:
        raise InvalidInput(f"files: {shown} must be 1 to {MAX_FILE_PATH_CHARS} characters")
    if name.startswith("/") or "\\" in name:
        raise InvalidInput(f"files: {shown} must be a relative path (no leading '/', no '\\')")
    parts = name.split("/")
    if len(parts) > MAX_PATH_DEPTH:
        raise InvalidInput(f"files: {shown} is nested deeper than {MAX_PATH_DEPTH} directories")
    for part in parts:
        if part in ("", ".", ".."):
            raise InvalidInput(
                f"files: {shown} must stay inside the working directory "
                "(no '..', '.' or empty path components)"
            )
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in name) or not name.isprintable():
        raise InvalidInput(f"files: {shown} holds control or unprintable characters")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"files: {shown} is not valid UTF-8") from exc
    if parts[0] in reserved:
        raise InvalidInput(f"files: {shown} is the program's own file; choose another name")
    return name


def decode_files(
    files: Mapping[str, str | None], max_bytes: int, reserved: tuple[str, ...] = ()
) -> tuple[WorkFile, ...]:
    """The request's files, checked and decoded (a None content is an empty file).

    Raises:
        InvalidInput: a bad name (see `check_file_name`), contents that are not base64,
            two names where one is a directory of the other, or more than `max_bytes`.
    """
    decoded: list[WorkFile] = []
    total = 0
    names = set(files)
    for name, contents in files.items():
        check_file_name(name, reserved)
        parts = name.split("/")
        for depth in range(1, len(parts)):
            if "/".join(parts[:depth]) in names:
                raise InvalidInput(
                    f"files: {name[:80]!r} lies under {'/'.join(parts[:depth])[:80]!r}, "
                    "which is a file too"
                )
        text = contents or ""
        if len(text) > max_bytes * 4 // 3 + 4:
            raise _too_big(max_bytes)
        try:
            data = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise InvalidInput(f"files: the contents of {name[:80]!r} are not base64") from exc
        total += len(data)
        if total > max_bytes:
            raise _too_big(max_bytes)
        decoded.append((name, data, 0o644))
    return tuple(decoded)


def _too_big(max_bytes: int) -> InvalidInput:
    return InvalidInput(
        f"files hold more than {max_bytes} bytes (decoded), this executor's cap "
        "(COBALT_EXECUTOR_MAX_FILES_KB)"
    )
