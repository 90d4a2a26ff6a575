"""What the runner depends on of the app-server client, named: the seam's Protocols.

The runner never needs to know which connection it drives. Three roles, each with a
real implementation and the in-memory one the runner's control-flow tests use
(``tests/support/appserver_memory.py``), which must satisfy the same Protocol without
a cast (mypy checks ``tests/support`` strictly), so the fake cannot drift from the
real thing unnoticed:

* ``Dispatcher``: one live JSON-RPC connection: requests, notifications, the router
  that delivers what codex sends, and the connection's end. ``rpc.Dispatcher`` over a
  transport; ``FakeDispatcher`` over an in-memory codex.
* ``Client``: the typed app-server methods the runner calls. ``methods.AppServerClient``
  is the one implementation: the fake plugs in one level lower, as a ``Dispatcher``,
  so the real client's overload policy and unrepeatable requests run in every test.
* ``Supervisor``: what gives the runner a live client, and says whether codex is up.
  ``client.AppServer`` (it starts, dials and restarts codex); ``MemoryAppServer``.

Protocols only: this module imports no implementation, so every layer may import it.
"""

from __future__ import annotations

import asyncio
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from boss_agent.appserver.routing import Router, ServerRequest, ThreadListener


class Dispatcher(Protocol):
    """One live connection to an app-server."""

    router: Router  # where notifications and server requests go, by thread and turn
    closed: asyncio.Event  # set once the connection is gone

    async def request(self, method: str, params: dict[str, Any] | None, timeout: float) -> Any:
        """One request's result; raises RpcError, RequestTimeout or ConnectionClosed."""

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """One notification to the app-server."""

    async def answer_unrouted(self, requests: list[ServerRequest]) -> None:
        """Give codex's requests nobody answered their default answer (or codex waits)."""


class Client(Protocol):
    """The app-server methods the runner calls, over one live connection."""

    @property
    def closed(self) -> bool: ...

    async def call(self, method: str, params: dict[str, Any] | None = None, *,
                   timeout: float | None = None) -> Any: ...

    async def thread_start(self, **params: Any) -> dict[str, Any]: ...

    async def thread_resume(self, thread_id: str, **params: Any) -> dict[str, Any]: ...

    async def thread_read(self, thread_id: str, include_turns: bool = False) -> dict[str, Any]: ...

    async def thread_items_list(self, thread_id: str, **params: Any) -> dict[str, Any]: ...

    async def thread_turns_list(self, thread_id: str, **params: Any) -> dict[str, Any]: ...

    async def thread_inject_items(self, thread_id: str, items: list[dict[str, Any]]) -> dict[str, Any]: ...

    async def turn_interrupt(self, thread_id: str, turn_id: str) -> dict[str, Any]: ...

    async def turn_start(self, thread_id: str, input: list[dict[str, Any]], **params: Any) -> dict[str, Any]: ...

    async def turn_steer(self, thread_id: str, expected_turn_id: str,
                         input: list[dict[str, Any]]) -> dict[str, Any]: ...

    def listen(self, thread_id: str) -> AbstractAsyncContextManager[ThreadListener]: ...

    def listen_all(self) -> AbstractAsyncContextManager[ThreadListener]: ...


class Supervisor(Protocol):
    """Where the runner gets a live client (waiting while codex restarts)."""

    @property
    def status(self) -> dict[str, Any]:
        """``available``, ``version``, ``transport``…: what the heartbeat reports."""

    @property
    def child_pid(self) -> int | None:
        """The codex process this daemon started (None: not ours, or none)."""

    async def client(self) -> Client: ...

