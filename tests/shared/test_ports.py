"""`free_port`: a port the caller can listen on at the address it asked about."""

from __future__ import annotations

import socket

import pytest

from cobalt.shared.ports import free_port


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0"])
def test_the_port_is_free_to_listen_on_at_that_host(host: str) -> None:
    port = free_port(host)
    assert 1024 <= port <= 65535
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind((host, port))
        server.listen()


def test_nothing_listens_on_it() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as client:
        assert client.connect_ex(("127.0.0.1", free_port())) != 0


def test_a_port_in_use_is_not_returned() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        assert all(free_port() != taken for _ in range(50))
