"""The log set-up every entry point calls: per-request lines of HTTP clients only at DEBUG."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from cobalt.shared.logging import configure_logging


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    clients = {name: logging.getLogger(name).level for name in ("httpx", "httpcore")}
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    for name, client_level in clients.items():
        logging.getLogger(name).setLevel(client_level)


def emitted(logger: str, level: int) -> bool:
    return logging.getLogger(logger).isEnabledFor(level)


def test_at_info_the_http_clients_request_lines_are_left_out_but_their_warnings_kept() -> None:
    configure_logging("INFO")
    assert not emitted("httpx", logging.INFO)
    assert emitted("httpx", logging.WARNING)
    assert not emitted("httpcore", logging.INFO)
    assert emitted("cobalt.trainer.loop", logging.INFO)


def test_at_debug_every_request_line_is_logged() -> None:
    configure_logging("DEBUG")
    assert emitted("httpx", logging.INFO)
    assert emitted("httpcore", logging.DEBUG)


def test_a_later_call_at_info_quiets_them_again() -> None:
    configure_logging("DEBUG")
    configure_logging("info")
    assert not emitted("httpx", logging.INFO)
