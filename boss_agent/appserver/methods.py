"""The typed app-server client: methods, the overload policy, and unrepeatable requests.

``AppServerClient`` maps app-server methods onto the dispatcher of one live connection.
``call`` bounds in-flight requests well below codex's 128-slot ingress queue and retries
``-32001 Server overloaded`` with jittered exponential backoff (the ``OverloadRetry``,
apart from the call so tests inject a fast one). An overloaded request never reached
codex's queue, so retrying it is always safe.

A request that got *no* answer may still have run. ``turn/start`` and ``turn/steer``
are therefore tagged with a ``clientUserMessageId``; after a timeout the client looks
for that user message in ``thread/turns/list`` and resends only when codex's answers
show it absent: a thread with no turn yet (``thread/read``: idle, no preview), or newest
turns whose every user message carries another tag. Anything else (a codex that drops
the tag, a refused list) re-raises the timeout, and the task fails ``app_server_lost``
rather than risk a second turn. No error text is read.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from typing import Any

from tenacity import RetryCallState

import boss_agent
from boss_agent.appserver.routing import ThreadListener
from boss_agent.appserver import contract
from boss_agent.appserver.contract import Dispatcher
from boss_agent.backoff import Backoff
from boss_agent.errors import (
    ConnectionClosed,
    RequestTimeout,
    RpcError,
    ServerOverloaded,
)
from boss_agent.jsonshape import mapping, obj

logger = logging.getLogger(__name__)

# codex's ingress channel holds 128 requests and answers -32001 beyond that;
# 32 leaves room for the other connections sharing a listener.
MAX_IN_FLIGHT = 32
# Notifications the progress card never reads; opting out saves a JSON line per chunk.
OPT_OUT_NOTIFICATIONS = ("item/commandExecution/outputDelta", "thread/readState/changed")
TURN_CHECK_LIMIT = 5  # the unanswered turn/start is among the thread's newest turns
CLIENT_NAME = "boss-agent"


@dataclass(frozen=True)
class OverloadRetry(Backoff):
    """Retry -32001 up to ``max_retries`` times, exponential backoff with jitter."""

    max_retries: int | None = 3
    initial_s: float = 0.2  # codex drains its queue within milliseconds to a second
    max_s: float = 3.0
    jitter_s: float = 0.2  # spreads a burst of concurrent retries apart

    def retryable(self, exc: BaseException) -> bool:
        return isinstance(exc, ServerOverloaded)

    def log_retry(self, what: str, state: RetryCallState) -> None:
        logger.info("codex app-server overloaded; retry %s", state.attempt_number)


class NotProvable(Exception):
    """codex's answers cannot show that an unanswered request did not run."""


class AppServerClient(contract.Client):
    """Typed methods over one initialized connection (a ``contract.Client`` over a
    ``contract.Dispatcher``). Safe to share between tasks."""

    def __init__(self, dispatcher: Dispatcher, *, timeout_s: float,
                 policy: OverloadRetry | None = None, max_in_flight: int = MAX_IN_FLIGHT) -> None:
        self.dispatcher = dispatcher
        self.timeout_s = timeout_s
        self.policy = policy or OverloadRetry()
        self._slots = asyncio.Semaphore(max_in_flight)

    @property
    def closed(self) -> bool:
        return self.dispatcher.closed.is_set()

    async def initialize(self) -> dict[str, Any]:
        """The handshake: ``initialize`` then the ``initialized`` notification."""
        result = await self.dispatcher.request("initialize", {
            "clientInfo": {"name": CLIENT_NAME, "title": "Boss agent", "version": boss_agent.__version__},
            "capabilities": {"experimentalApi": True,
                             "optOutNotificationMethods": list(OPT_OUT_NOTIFICATIONS)},
        }, self.timeout_s)
        await self.dispatcher.notify("initialized")
        return result if isinstance(result, dict) else {}

    async def call(self, method: str, params: dict[str, Any] | None = None, *,
                   timeout: float | None = None) -> Any:
        """One request; -32001 retried by the policy. RpcError / RequestTimeout / ConnectionClosed."""
        deadline = self.timeout_s if timeout is None else timeout
        async for attempt in self.policy.retrying():
            with attempt:
                async with self._slots:
                    return await self.dispatcher.request(method, params, deadline)
        raise AssertionError("unreachable: tenacity reraises the last error")

    # ----------------------------------------------------------- typed wrappers

    async def thread_start(self, **params: Any) -> dict[str, Any]:
        return obj(await self.call("thread/start", params))

    async def thread_resume(self, thread_id: str, **params: Any) -> dict[str, Any]:
        return obj(await self.call("thread/resume", {"threadId": thread_id, **params}))

    async def thread_read(self, thread_id: str, include_turns: bool = False) -> dict[str, Any]:
        return obj(await self.call("thread/read", {"threadId": thread_id, "includeTurns": include_turns}))

    async def thread_items_list(self, thread_id: str, **params: Any) -> dict[str, Any]:
        return obj(await self.call("thread/items/list", {"threadId": thread_id, **params}))

    async def thread_turns_list(self, thread_id: str, **params: Any) -> dict[str, Any]:
        return obj(await self.call("thread/turns/list", {"threadId": thread_id, **params}))

    async def thread_inject_items(self, thread_id: str, items: list[dict[str, Any]]) -> dict[str, Any]:
        return obj(await self.call("thread/inject_items", {"threadId": thread_id, "items": items}))

    async def turn_interrupt(self, thread_id: str, turn_id: str) -> dict[str, Any]:
        return obj(await self.call("turn/interrupt", {"threadId": thread_id, "turnId": turn_id}))

    async def turn_start(self, thread_id: str, input: list[dict[str, Any]], **params: Any) -> dict[str, Any]:
        """Start (or, when a turn is active, join) a turn; never started twice on a timeout."""
        client_id = params.setdefault("clientUserMessageId", _message_tag())
        payload = {"threadId": thread_id, "input": input, **params}

        async def already_ran() -> dict[str, Any] | None:
            turn = await self._turn_with_message(thread_id, client_id)
            return {"turn": turn} if turn is not None else None

        return await self._unrepeatable("turn/start", payload, already_ran)

    async def turn_steer(self, thread_id: str, expected_turn_id: str,
                         input: list[dict[str, Any]]) -> dict[str, Any]:
        """Add input to the active turn; never applied twice on a timeout."""
        client_id = _message_tag()
        payload = {"threadId": thread_id, "expectedTurnId": expected_turn_id, "input": input,
                   "clientUserMessageId": client_id}

        async def already_ran() -> dict[str, Any] | None:
            turn = await self._turn_with_message(thread_id, client_id)
            return {"turnId": turn["id"]} if turn is not None else None

        return await self._unrepeatable("turn/steer", payload, already_ran)

    async def _unrepeatable(self, method: str, payload: dict[str, Any],
                            already_ran: Callable[[], Awaitable[dict[str, Any] | None]]) -> dict[str, Any]:
        try:
            return obj(await self.call(method, payload))
        except RequestTimeout as lost:
            logger.warning("%s got no answer; checking the thread before resending", method)
            try:
                found = await already_ran()
            except (NotProvable, RpcError) as exc:
                # Resending could run the prompt twice: the task fails (app_server_lost).
                logger.warning("%s: cannot tell whether it ran (%s); not resending", method,
                               exc.__class__.__name__)
                raise lost from exc
        if found is not None:
            logger.info("%s had run despite the lost answer; not resending", method)
            return found
        return obj(await self.call(method, payload))

    async def _turn_with_message(self, thread_id: str, client_id: str) -> dict[str, Any] | None:
        """The newest turn holding the user message we tagged with ``client_id``; None only
        when codex shows that no turn holds it (``NotProvable`` when it cannot show that)."""
        try:
            page = await self.thread_turns_list(thread_id, limit=TURN_CHECK_LIMIT, itemsView="full",
                                                sortDirection="desc")
        except RpcError:
            # codex refuses to list the turns of a thread no user message reached yet
            # ("not materialized"); thread/read tells that state by its fields, not a text.
            await self._never_had_a_turn(thread_id)
            return None
        for turn in page.get("data") or []:
            for item in turn.get("items") or []:
                if item.get("type") != "userMessage":
                    continue
                if item.get("clientId") == client_id:
                    return obj(turn)
                if not item.get("clientId"):
                    # A codex that drops the tag (0.135), or another client's message: this
                    # one may be ours, so its absence proves nothing.
                    raise NotProvable("a recent user message carries no clientUserMessageId")
        return None

    async def _never_had_a_turn(self, thread_id: str) -> None:
        thread = mapping((await self.thread_read(thread_id)).get("thread"))
        status = mapping(thread.get("status")).get("type")
        if thread.get("preview") or status != "idle":
            raise NotProvable(f"the thread is {status or 'in an unknown state'} and its turns cannot be listed")

    # ----------------------------------------------------------- listeners

    @asynccontextmanager
    async def listen(self, thread_id: str) -> AsyncIterator[ThreadListener]:
        """Route ``thread_id``'s notifications and server requests here, in wire order."""
        async with self._registered(ThreadListener({thread_id})) as listener:
            yield listener

    @asynccontextmanager
    async def listen_all(self) -> AsyncIterator[ThreadListener]:
        """Every notification (no server requests): for tests and tools."""
        async with self._registered(ThreadListener(None)) as listener:
            yield listener

    @asynccontextmanager
    async def _registered(self, listener: ThreadListener) -> AsyncIterator[ThreadListener]:
        self.dispatcher.router.add(listener)
        try:
            yield listener
        finally:
            self.dispatcher.router.remove(listener)
            # Requests the listener never answered still need one, or codex waits forever.
            with suppress(ConnectionClosed):
                await self.dispatcher.answer_unrouted(listener.pending_requests())


def _message_tag() -> str:
    return f"boss-{uuid.uuid4().hex}"
