"""A phone on its own network: a namespace joined to this one by a veth pair.

``phone_net`` creates the namespace and the veth pair with one /24 of 10.77.N.0
(N from the test process's pid, so two runs side by side do not collide): the root
namespace's end gets ``.1`` (where the control plane's ``local.listen`` binds), the
phone's end ``.2``. Only these two addresses are ever configured, and both go with
the pair, which the fixture removes even when the test fails. CI runs as root;
``scripts/test.sh`` installs ``iproute2``.

``Phone`` runs ``phone_client.py`` inside the namespace and talks to it over its
stdin and stdout. Every test below this folder is marked ``phone``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.layer import apply_marker

CLIENT = Path(__file__).with_name("phone_client.py")
REPLY_TIMEOUT_S = 30.0  # a request over the veth answers in milliseconds; this only bounds a hang


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    apply_marker(items, Path(__file__).parent, "phone")


@dataclass(frozen=True)
class PhoneNet:
    namespace: str
    host_ip: str  # the root namespace's end of the veth
    phone_ip: str


def _ip(*args: str, check: bool = True) -> None:
    subprocess.run(["ip", *args], check=check, capture_output=True, timeout=30)


@pytest.fixture
def phone_net() -> Iterator[PhoneNet]:
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.fail("the phone tests need root and iproute2 (scripts/test.sh installs it; CI runs as root)")
    tag = os.getpid() % 250 + 1
    net = PhoneNet(f"bossphone{os.getpid()}", f"10.77.{tag}.1", f"10.77.{tag}.2")
    host_if, phone_if = f"bph{os.getpid()}h"[:15], f"bph{os.getpid()}p"[:15]
    try:
        _ip("netns", "add", net.namespace)
        _ip("link", "add", host_if, "type", "veth", "peer", "name", phone_if)
        _ip("link", "set", phone_if, "netns", net.namespace)
        _ip("addr", "add", f"{net.host_ip}/24", "dev", host_if)
        _ip("link", "set", host_if, "up")
        _ip("-n", net.namespace, "addr", "add", f"{net.phone_ip}/24", "dev", phone_if)
        _ip("-n", net.namespace, "link", "set", phone_if, "up")
        _ip("-n", net.namespace, "link", "set", "lo", "up")
        yield net
    finally:
        _ip("link", "del", host_if, check=False)  # takes its peer and both addresses with it
        _ip("netns", "del", net.namespace, check=False)


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
