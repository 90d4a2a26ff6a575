"""Fixtures shared by the peer folders: a NOTIFY_SOCKET as systemd passes it, and the
fault-injecting ``proxy`` between a daemon and the ``plane`` of tests/conftest.py."""

from collections.abc import AsyncIterator, Iterator

import pytest

from boss_agent.controlplane import ControlPlane
from tests.support.daemon import FaultProxy
from tests.support.notify_socket import NotifySocket


@pytest.fixture
def notify() -> Iterator[NotifySocket]:
    sock = NotifySocket()
    yield sock
    sock.close()


@pytest.fixture
async def proxy(plane: ControlPlane) -> AsyncIterator[FaultProxy]:
    """A real HTTP proxy in front of ``plane`` that records requests and injects faults."""
    async with FaultProxy(plane.url) as proxy:
        yield proxy
