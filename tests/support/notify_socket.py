"""A test NOTIFY_SOCKET: the AF_UNIX datagram socket systemd would pass to the daemon.

One class for the synchronous lifecycle tests and the asyncio ones; the ``notify``
fixture of tests/peers/conftest.py gives a fresh socket per test.
"""

from __future__ import annotations

import asyncio
import os
import select
import shutil
import socket
import tempfile
import time

DATAGRAM_BYTES = 4096
DEFAULT_TIMEOUT_S = 30  # generous: two cores shared with codex and other tests


class NotifySocket:
    def __init__(self) -> None:
        # sun_path is limited to 108 bytes; pytest's tmp_path can be longer.
        self.dir = tempfile.mkdtemp(prefix="bn-", dir="/tmp")
        self.path = os.path.join(self.dir, "notify")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.setblocking(False)
        self.seen: list[str] = []  # every datagram so far, in order

    def wait_for(self, message: str, timeout: float = DEFAULT_TIMEOUT_S) -> list[str]:
        """Block until ``message`` arrives; return what arrived during this call."""
        deadline = time.monotonic() + timeout
        start = len(self.seen)
        while message not in self.seen[start:]:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self.sock], [], [], remaining)[0]:
                raise TimeoutError(f"no {message} on the notify socket")
            self.seen.append(self.sock.recv(DATAGRAM_BYTES).decode())
        return self.seen[start:]

    async def arrival(self, message: str, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        """Await ``message`` (or any earlier arrival of it) without blocking the loop."""
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(timeout):
            while message not in self.seen:
                self.seen.append((await loop.sock_recv(self.sock, DATAGRAM_BYTES)).decode())

    def close(self) -> None:
        self.sock.close()
        shutil.rmtree(self.dir, ignore_errors=True)

