"""A phone on its own network, as the tests drive it: the namespace's addresses
(``PhoneNet``, made by the ``phone_net`` fixture of tests/peers/phone) and ``Phone``,
``phone_client.py`` running inside that namespace, talked to over its stdin and stdout."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CLIENT = Path(__file__).with_name("phone_client.py")
REPLY_TIMEOUT_S = 30.0  # a request over the veth answers in milliseconds; this only bounds a hang


@dataclass(frozen=True)
class PhoneNet:
    namespace: str
    host_ip: str  # the root namespace's end of the veth
    phone_ip: str


@dataclass
class Phone:
    """``phone_client.py`` in the phone's namespace; ``call`` sends one request through it."""

    proc: asyncio.subprocess.Process
    fingerprint: str = ""
    _ids: int = 0
    _replies: dict[int, asyncio.Queue[dict[str, Any]]] = field(default_factory=dict)

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            message = json.loads(line)
            self._replies.setdefault(message["id"], asyncio.Queue()).put_nowait(message)

    def _send(self, command: dict[str, Any]) -> int:
        self._ids += 1
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps({"id": self._ids, **command}) + "\n").encode())
        self._replies.setdefault(self._ids, asyncio.Queue())
        return self._ids

    async def reply(self, command_id: int) -> dict[str, Any]:
        async with asyncio.timeout(REPLY_TIMEOUT_S):
            return await self._replies[command_id].get()

    async def call(self, method: str, path: str, body: Any = None, token: str | None = None) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return await self.reply(self._send({"method": method, "path": path, "json": body, "headers": headers}))

    def open_stream(self, path: str, token: str | None = None) -> int:
        return self._send({"stream": path, "headers": {"Authorization": f"Bearer {token}"} if token else {}})


@contextlib.asynccontextmanager
async def phone_in(net: PhoneNet, pairing_url: str) -> AsyncIterator[Phone]:
    """A phone process in ``net`` that checked the certificate of ``pairing_url``'s origin."""
    proc = await asyncio.create_subprocess_exec(
        "ip", "netns", "exec", net.namespace, sys.executable, str(CLIENT), pairing_url,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    phone = Phone(proc)
    try:
        assert proc.stdout is not None and proc.stderr is not None
        async with asyncio.timeout(REPLY_TIMEOUT_S):
            first = await proc.stdout.readline()
        if not first:
            raise AssertionError(f"the phone gave up: {(await proc.stderr.read()).decode()[-500:]}")
        phone.fingerprint = json.loads(first)["fingerprint"]
        async with asyncio.TaskGroup() as group:
            reader = group.create_task(phone._read())
            try:
                yield phone
            finally:
                assert proc.stdin is not None
                proc.stdin.close()
                reader.cancel()
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
