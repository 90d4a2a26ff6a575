"""sd_notify and the Watchdog against a real unix datagram socket standing in for systemd's."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import tempfile
import uuid
from collections.abc import Iterator

import pytest

from boss_agent.daemon.process import READY, WATCHDOG, Watchdog, sd_notify

RECV_TIMEOUT_S = 10


@pytest.fixture
def notify_path() -> Iterator[str]:
    directory = tempfile.mkdtemp(prefix="bn-", dir="/tmp")  # sun_path is 108 bytes at most
    yield os.path.join(directory, "notify")
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def receiver(notify_path: str) -> Iterator[socket.socket]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(notify_path)
    sock.settimeout(RECV_TIMEOUT_S)
    yield sock
    sock.close()


def test_sd_notify_sends_one_datagram_to_the_socket_path(notify_path, receiver):
    assert sd_notify("READY=1\nSTATUS=up", {"NOTIFY_SOCKET": notify_path}) is True
    assert receiver.recv(4096) == b"READY=1\nSTATUS=up"


def test_sd_notify_reaches_an_abstract_socket_named_with_an_at_sign():
    name = f"boss-agent-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        sock.settimeout(RECV_TIMEOUT_S)
        assert sd_notify(READY, {"NOTIFY_SOCKET": "@" + name}) is True
        assert sock.recv(4096) == b"READY=1"


def test_sd_notify_is_a_no_op_outside_systemd():
    assert sd_notify(READY, {}) is False


def test_sd_notify_to_a_socket_nobody_listens_on_returns_false_instead_of_raising(notify_path):
    assert sd_notify(READY, {"NOTIFY_SOCKET": notify_path}) is False


def test_sd_notify_never_blocks_when_the_receiver_stops_reading(notify_path, receiver):
    # The kernel queues only a few datagrams for a socket nobody reads; then a
    # blocking send would hang the daemon's loop. Ours gives up instead.
    results = [sd_notify(WATCHDOG, {"NOTIFY_SOCKET": notify_path}) for _ in range(2000)]
    assert results[0] is True
    assert False in results


def test_watchdog_interval_is_half_of_watchdog_usec():
    assert Watchdog.from_env({"WATCHDOG_USEC": "30000000"}).interval_s == 15.0
    assert Watchdog.from_env({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": str(os.getpid())}).enabled


@pytest.mark.parametrize(
    "environ",
    [{}, {"WATCHDOG_USEC": "0"}, {"WATCHDOG_USEC": "soon"}, {"WATCHDOG_USEC": "1000", "WATCHDOG_PID": "1"}],
    ids=["unset", "zero", "garbage", "another-pid"],
)
def test_watchdog_is_disabled_unless_systemd_asked_this_process(environ):
    assert not Watchdog.from_env(environ).enabled


async def test_a_disabled_watchdog_returns_at_once():
    await asyncio.wait_for(Watchdog(None).run(lambda: True), RECV_TIMEOUT_S)


async def _recv(sock: socket.socket) -> bytes:
    loop = asyncio.get_running_loop()
    return await asyncio.wait_for(loop.sock_recv(sock, 4096), RECV_TIMEOUT_S)


async def test_watchdog_pings_while_healthy_and_stops_when_asked(notify_path, receiver, monkeypatch):
    monkeypatch.setenv("NOTIFY_SOCKET", notify_path)
    receiver.setblocking(False)
    stop = asyncio.Event()
    async with asyncio.TaskGroup() as group:
        run = group.create_task(Watchdog.from_env({"WATCHDOG_USEC": "40000"}).run(lambda: True, stop))
        assert await _recv(receiver) == WATCHDOG.encode()
        assert await _recv(receiver) == WATCHDOG.encode()
        stop.set()
    assert run.done() and run.exception() is None


async def test_watchdog_withholds_pings_while_the_loop_is_unhealthy(notify_path, receiver, monkeypatch):
    monkeypatch.setenv("NOTIFY_SOCKET", notify_path)
    receiver.setblocking(False)
    checks: list[bool] = []

    def healthy() -> bool:
        checks.append(len(checks) >= 3)  # unhealthy for the first three ticks
        return checks[-1]

    stop = asyncio.Event()
    async with asyncio.TaskGroup() as group:
        group.create_task(Watchdog(0.01).run(healthy, stop))
        assert await _recv(receiver) == WATCHDOG.encode()
        assert checks[:4] == [False, False, False, True]
        stop.set()
