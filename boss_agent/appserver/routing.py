"""Who gets each notification and server request: thread listeners, in wire order.

A ``ThreadListener`` is a queue registered for a set of thread ids (or for everything).
The dispatcher hands every notification to each listener whose ids contain
``params.threadId`` (and to every catch-all listener), and every server-to-client
request to the listener whose turn asked: codex names it in ``params.turnId``, and a
runner claims its turn (``claim_turn``) as soon as ``turn/start`` names it; a
sub-agent's turn (``rootTurnId``) is its root's. Two listeners may share a thread (a
steer beside the turn it joined): the request goes to the turn's own task, never
simply to whichever listener came first. A request no listener's turn claims goes to
the first thread listener that routes its thread.

Threads a listener's turn spawns become its threads too, before their first request can
arrive: codex reports a sub-agent in the parent's ``collabAgentToolCall`` item
(``receiverThreadIds``), in ``thread/started`` (``parentThreadId``) and in the child's
``turn/started`` (``rootTurnId`` = the parent's turn). The dispatcher adopts them while
it reads that notification, so the child's approval request, which codex sends later on
the same connection, is already routed. Connection-level notifications (account, rate
limits, remote control, config warnings) carry no thread id: every thread listener gets
them, so every task running on this app-server shows them. A server request that no
listener takes is answered at once with a safe default (decline / no answers / failed
tool call / JSON-RPC error), so codex never waits on us.

When the connection dies, each listener yields what it already queued and then raises
``ConnectionClosed``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from boss_agent.errors import METHOD_NOT_FOUND, ConnectionClosed
from boss_agent.jsonshape import obj

logger = logging.getLogger(__name__)

# Default answers for server requests nobody took. Approvals are declined (decline works
# even when availableDecisions omits it); legacy v1 approvals use "denied".
DEFAULT_ANSWERS: dict[str, dict[str, Any]] = {
    "item/commandExecution/requestApproval": {"decision": "decline"},
    "item/fileChange/requestApproval": {"decision": "decline"},
    "execCommandApproval": {"decision": "denied"},
    "applyPatchApproval": {"decision": "denied"},
    "item/tool/requestUserInput": {"answers": {}},
    "item/tool/call": {"contentItems": [], "success": False},
    "mcpServer/elicitation/request": {"action": "decline"},
    "item/permissions/requestApproval": {"permissions": {}, "scope": "turn"},
}
# Notifications about the connection, not a thread: fanned out to every thread listener.
CONNECTION_METHODS = frozenset({
    "account/updated", "account/rateLimits/updated", "remoteControl/status/changed",
    "configWarning", "deprecationNotice",
})


@dataclass(frozen=True)
class Notification:
    method: str
    params: dict[str, Any]
    raw: dict[str, Any]  # the whole wire message (carries emittedAtMs)


Answer = Callable[[int | str, dict[str, Any] | None, dict[str, Any] | None], Awaitable[None]]


class ServerRequest:
    """A request codex sent us; answer it exactly once.

    ``connection`` is the nonce of the connection it came on: codex numbers requests from
    0 on every connection, so (connection, id) names a request, the id alone does not.
    """

    def __init__(self, id: int | str, method: str, params: dict[str, Any], answer: Answer,
                 connection: str = "") -> None:
        self.id = id
        self.connection = connection
        self.method = method
        self.params = params
        self._answer = answer
        self._answered = False

    @property
    def answered(self) -> bool:
        return self._answered

    async def respond(self, result: dict[str, Any]) -> None:
        if not self._claim():
            return
        await self._answer(self.id, result, None)

    async def fail(self, code: int, message: str) -> None:
        if not self._claim():
            return
        await self._answer(self.id, None, {"code": code, "message": message})

    async def answer_default(self) -> None:
        """The safe answer used when no listener takes this request."""
        default = DEFAULT_ANSWERS.get(self.method)
        if default is not None:
            await self.respond(dict(default))
        else:
            await self.fail(METHOD_NOT_FOUND, f"boss-agent does not handle {self.method}")

    def _claim(self) -> bool:
        # Checked and set before the first await, so two concurrent answers cannot both send.
        if self._answered:
            return False
        self._answered = True
        return True

    def __repr__(self) -> str:  # never the params: they quote commands
        return f"ServerRequest(method={self.method!r}, answered={self._answered})"


# The notifications ``ThreadListener.adopt`` acts on; it ignores every other method.
ADOPTING_METHODS = frozenset({"thread/started", "turn/started", "item/started", "item/completed"})

Delivery = Notification | ServerRequest
_CLOSED = object()


class ThreadListener:
    """Async iterator of the notifications and server requests routed to it."""

    def __init__(self, thread_ids: set[str] | None) -> None:
        self._threads = thread_ids  # None: every notification (no server requests)
        self._turns: set[str] = set()  # turns started on its threads (sub-agents name their root)
        self._own: set[str] = set()  # the turns its task started, and their sub-agents' turns
        self._queue: asyncio.Queue[Delivery | object] = asyncio.Queue()
        self._closed: ConnectionClosed | None = None
        self._requests: list[ServerRequest] = []  # every request routed here

    @property
    def catch_all(self) -> bool:
        return self._threads is None

    def route_thread(self, thread_id: str) -> None:
        if self._threads is not None:
            self._threads.add(thread_id)

    def claim_turn(self, turn_id: str) -> None:
        """This listener's task started ``turn_id``: requests of that turn are its own."""
        self._own.add(turn_id)
        if self._threads is not None:
            self._turns.add(turn_id)  # its sub-agents' threads are routed here too

    def owns(self, turn_id: object) -> bool:
        return turn_id in self._own

    def adopt(self, note: Notification) -> None:
        """Route the threads ``note`` says were spawned by one of this listener's turns."""
        if self._threads is None:
            return
        params = note.params
        if note.method == "thread/started":
            thread = obj(params.get("thread"))
            if thread.get("parentThreadId") in self._threads and isinstance(thread.get("id"), str):
                self._threads.add(thread["id"])
            return
        if note.method == "turn/started":
            turn = obj(params.get("turn"))
            if turn.get("rootTurnId") in self._own and isinstance(turn.get("id"), str):
                self._own.add(turn["id"])  # a sub-agent's turn asks on behalf of its root's task
        if params.get("threadId") in self._threads:
            self._adopt_own(note.method, params)
        elif note.method == "turn/started":
            turn = obj(params.get("turn"))
            if turn.get("rootTurnId") in self._turns and isinstance(params.get("threadId"), str):
                self._threads.add(params["threadId"])

    def _adopt_own(self, method: str, params: dict[str, Any]) -> None:
        assert self._threads is not None  # only thread listeners adopt
        if method == "turn/started":
            turn = obj(params.get("turn"))
            if isinstance(turn.get("id"), str):
                self._turns.add(turn["id"])
        elif method in ("item/started", "item/completed"):
            item = obj(params.get("item"))
            if item.get("type") == "collabAgentToolCall":
                for child in item.get("receiverThreadIds") or ():
                    if isinstance(child, str):
                        self._threads.add(child)

    def wants(self, thread_id: object) -> bool:
        return self._threads is None or thread_id in self._threads

    def routes(self, thread_id: object) -> bool:
        return self._threads is not None and thread_id in self._threads

    def put(self, delivery: Delivery) -> None:
        if isinstance(delivery, ServerRequest):
            self._requests.append(delivery)
        self._queue.put_nowait(delivery)

    def close(self, error: ConnectionClosed) -> None:
        if self._closed is None:
            self._closed = error
            self._queue.put_nowait(_CLOSED)

    def pending_requests(self) -> list[ServerRequest]:
        """Routed here and still unanswered (answered by default when the listener leaves)."""
        return [request for request in self._requests if not request.answered]

    def __aiter__(self) -> ThreadListener:
        return self

    async def __anext__(self) -> Delivery:
        item = await self._queue.get()
        if item is _CLOSED:
            self._queue.put_nowait(_CLOSED)  # keep raising on every later call
            assert self._closed is not None
            raise ConnectionClosed(str(self._closed))
        assert isinstance(item, Notification | ServerRequest)
        return item


class Router:
    """The listener registry the dispatcher feeds."""

    def __init__(self) -> None:
        self._listeners: list[ThreadListener] = []
        self._closed: ConnectionClosed | None = None

    def add(self, listener: ThreadListener) -> None:
        if self._closed is not None:
            listener.close(self._closed)
        self._listeners.append(listener)

    def remove(self, listener: ThreadListener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def notification(self, note: Notification) -> None:
        thread_id = note.params.get("threadId")
        if thread_id is None and note.method == "thread/started":
            thread = note.params.get("thread")
            thread_id = thread.get("id") if isinstance(thread, dict) else None
        fan_out = thread_id is None and note.method in CONNECTION_METHODS
        # Only these can name a new thread; skipping the rest keeps an answer delta from
        # visiting every listener's adoption rules (N tasks at once: N calls per delta).
        adopting = note.method in ADOPTING_METHODS
        for listener in self._listeners:
            if adopting:
                listener.adopt(note)  # before delivery: a child's first request may follow at once
            if fan_out or listener.wants(thread_id):
                listener.put(note)

    def take(self, request: ServerRequest) -> bool:
        """Queue ``request`` on the listener whose turn asked, else on the first listener
        routing its thread; False if none."""
        thread_id = request.params.get("threadId")
        turn_id = request.params.get("turnId")
        for listener in self._listeners:
            if turn_id is not None and listener.owns(turn_id) and listener.routes(thread_id):
                listener.put(request)
                return True
        for listener in self._listeners:
            if listener.routes(thread_id):
                listener.put(request)
                return True
        return False

    def close(self, error: ConnectionClosed) -> None:
        self._closed = error
        for listener in self._listeners:
            listener.close(error)
