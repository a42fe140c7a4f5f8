"""Logging set-up, called once per entry point (CLI command, server, worker)."""

from __future__ import annotations

import json
import logging
import sys
import time

__all__ = ["configure_logging"]


class _JsonFormatter(logging.Formatter):
    """One JSON object per line: what log collectors in containers expect."""

    def format(self, record: logging.LogRecord) -> str:
        payload = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            payload["exc"] = self.formatException(record.exc_info)
        return json.dumps(payload)


def configure_logging(level: str = "INFO", *, json_lines: bool = False) -> None:
    """Send log records to stderr, as text for people or JSON lines for collectors.

    Args:
        level: A logging level name such as "INFO" or "DEBUG".
        json_lines: Emit JSON lines instead of text (set in containers).
    """
    handler = logging.StreamHandler(sys.stderr)
    if json_lines:
        handler.setFormatter(_JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # httpx logs every request at INFO: a trainer polling its job 4 times a second, or a
    # worker judging each program, would bury what matters. Its lines stay at DEBUG.
    quiet = logging.DEBUG if root.level <= logging.DEBUG else logging.WARNING
    for name in _PER_REQUEST_LOGGERS:
        logging.getLogger(name).setLevel(quiet)


_PER_REQUEST_LOGGERS = ("httpx", "httpcore")
"""Client libraries that log one INFO line per HTTP request."""
