"""Free-port selection and busy-port checks on the loopback interface."""

from __future__ import annotations

import socket
from contextlib import closing

from engine.base.errors import PortInUseError

LOOPBACK = "127.0.0.1"


def free_ports(count: int, host: str = LOOPBACK) -> list[int]:
    """Ask the kernel for `count` distinct free ports.

    All sockets stay open until every port is chosen, so the kernel never hands out the
    same port twice in one call.
    """
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((host, 0))
            sockets.append(sock)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for sock in sockets:
            sock.close()


def port_is_free(port: int, host: str = LOOPBACK) -> bool:
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def require_free(port: int, what: str, host: str = LOOPBACK) -> None:
    """Raise PortInUseError, naming the port and its purpose, if it is taken."""
    if not port_is_free(port, host):
        raise PortInUseError(
            f"Port {port} on {host} ({what}) is already in use by another process. Stop that "
            f"process (`ss -ltnp 'sport = :{port}'` shows which), or choose another port."
        )


def is_listening(port: int, host: str = LOOPBACK, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False
