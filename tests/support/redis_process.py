"""A real redis-server for a test: on a free loopback port, restartable on the same port.

``RedisProcess`` is the plain server of the ``redis_server`` fixture;
``redis_tls.TlsRedis`` is the same lifecycle with TLS and one ACL user (its own
arguments and its own PING). ``running`` starts one for the length of a block.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

from tests.support.ports import free_port

REDIS_START_TIMEOUT_S = 10
POLL_S = 0.05  # between connection attempts while redis-server starts


class RedisProcess:
    """A real redis-server on a free loopback port, restartable on the same port."""

    what = "redis-server"  # in the error when it does not start

    def __init__(self, binary: str, directory: Path) -> None:
        self.binary = binary
        self.directory = directory
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def arguments(self) -> list[str]:
        return ["--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.directory),
                "--save", "", "--appendonly", "no", "--protected-mode", "yes"]

    def answers_ping(self) -> bool:
        """One PING on a fresh connection; OSError while it is not listening yet."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")

    def start(self) -> None:
        self.proc = subprocess.Popen([self.binary, *self.arguments()],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + REDIS_START_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                if self.answers_ping():
                    return
            except OSError:
                time.sleep(POLL_S)
        raise RuntimeError(f"{self.what} did not start")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)


Server = TypeVar("Server", bound=RedisProcess)


@contextlib.contextmanager
def running(server: Server) -> Iterator[Server]:
    """``server`` started for the block, stopped after it."""
    server.start()
    try:
        yield server
    finally:
        server.stop()
