"""An in-memory codex app-server: a fake peer at the client seam, for millisecond runner tests.

Why a fake: the runner's control flow (cancel while an approval waits, a steer joining a
turn, a failed turn, the app-server lost mid-turn, a sub-agent's approval) is driven on
the real codex binary in ``tests/peers/codex``, but each of those tests costs a codex
process, a scripted model and seconds, and some orderings (the connection dying at one
exact step) are hard to reach there. This fake reaches them in milliseconds.

Where it sits: it replaces the JSON-RPC ``Dispatcher`` of one connection (the idea of
MCP python-sdk's ``DirectDispatcher``), so the real ``AppServerClient``, ``Router``,
``ThreadListener`` and ``ServerRequest`` run on top of it unchanged; ``MemoryAppServer``
stands in for the supervising ``AppServer`` (``client()``, ``status``). Both name the
Protocol they implement (``boss_agent/appserver/contract.py``), and mypy checks this
folder strictly: a fake that drifts from the seam fails the type check, not a test. Behind the seam
``FakeCodex`` plays codex: threads, turns, notifications and server requests, each
turn driven by a small async script (``enqueue``).

It cannot drift from the real peer unnoticed: ``tests/contract/test_appserver_contract.py``
runs the same scenarios against this fake and against real codex with the scripted model.
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from boss_agent.appserver import contract
from boss_agent.appserver.methods import AppServerClient
from boss_agent.appserver.routing import Notification, Router, ServerRequest
from boss_agent.errors import METHOD_NOT_FOUND, AppServerUnavailable, ConnectionClosed, RpcError
from boss_agent.runner.policy import sandbox_policy

REQUEST_TIMEOUT_S = 5.0  # nothing here blocks on I/O; a hang is a bug in a test's script
INVALID_REQUEST = -32600  # what codex answers a steer of a turn that is not active

Script = Callable[["FakeTurn"], Awaitable[None]]


class FakeDispatcher(contract.Dispatcher):
    """One in-memory connection: requests are method calls on ``FakeCodex``, no JSON."""

    def __init__(self, codex: FakeCodex) -> None:
        self.codex = codex
        self.nonce = secrets.token_hex(8)
        self.router = Router()
        self.closed = asyncio.Event()
        self._request_ids = itertools.count(0)  # codex numbers its requests from 0 per connection
        self._close_error: ConnectionClosed | None = None

    async def request(self, method: str, params: dict[str, Any] | None, timeout: float) -> Any:
        self._check_open()
        return await self.codex.handle(method, params or {})

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        self._check_open()

    async def answer_unrouted(self, requests: list[ServerRequest]) -> None:
        for request in requests:
            if not request.answered:
                await request.answer_default()

    def emit(self, method: str, params: dict[str, Any]) -> None:
        if self._close_error is None:
            self.router.notification(Notification(method, params, {"method": method, "params": params}))

    async def server_request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send codex's request to the client; return its answer (an error answer raises RpcError)."""
        self._check_open()
        answered: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()

        async def answer(_id: int | str, result: dict[str, Any] | None, error: dict[str, Any] | None) -> None:
            self._check_open()
            if not answered.done():
                if error is not None:
                    answered.set_exception(RpcError(int(error.get("code", 0)), str(error.get("message"))))
                else:
                    answered.set_result(result or {})

        request = ServerRequest(next(self._request_ids), method, params, answer, connection=self.nonce)
        if not self.router.take(request):
            await request.answer_default()
        return await answered

    def close(self, reason: str = "app-server connection closed") -> None:
        if self._close_error is None:
            self._close_error = ConnectionClosed(reason)
            self.router.close(self._close_error)
            self.closed.set()

    def _check_open(self) -> None:
        if self._close_error is not None:
            raise ConnectionClosed(str(self._close_error))


class FakeTurn:
    """What a turn script can do: speak, ask, wait for a steer, spawn a sub-agent, fail."""

    def __init__(self, codex: FakeCodex, thread_id: str, turn_id: str) -> None:
        self.codex = codex
        self.thread_id = thread_id
        self.id = turn_id
        self.steers: asyncio.Queue[list[dict[str, Any]]] = asyncio.Queue()
        self.error: str | None = None
        self.interrupted = False
        self.task: asyncio.Task[None] | None = None

    def emit(self, method: str, **params: Any) -> None:
        self.codex.emit(method, {"threadId": self.thread_id, "turnId": self.id, **params})

    async def say(self, text: str) -> None:
        item = {"type": "agentMessage", "id": self.codex.new_id("msg"), "text": text}
        self.emit("item/started", item={**item, "text": ""})
        self.emit("item/completed", item=item)

    async def ask_command(self, command: str) -> str:
        """A command approval; returns the client's decision (codex runs it on accept)."""
        item_id = self.codex.new_id("call")
        answer = await self.ask("item/commandExecution/requestApproval", {
            "kind": "command", "itemId": item_id, "command": command, "cwd": "/",
            "commandActions": [{"type": "unknown", "command": command}],
            "availableDecisions": ["accept", "cancel"]})
        decision = str(answer.get("decision"))
        if decision == "accept":
            item = {"type": "commandExecution", "id": item_id, "command": command, "status": "inProgress"}
            self.emit("item/started", item=item)
            self.emit("item/completed", item={**item, "status": "completed", "exitCode": 0})
        return decision

    async def ask(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        dispatcher = self.codex.dispatcher
        answer = await dispatcher.server_request(method, {"threadId": self.thread_id, "turnId": self.id,
                                                          **params})
        self.emit("serverRequest/resolved", requestId=0)
        return answer

    async def wait_steer(self) -> list[dict[str, Any]]:
        return await self.steers.get()

    async def hang(self) -> None:
        """Until interrupted (or the connection is lost)."""
        await asyncio.Event().wait()

    def fail(self, message: str) -> None:
        self.error = message

    async def spawn_child(self) -> FakeTurn:
        """A sub-agent: announced on this thread as codex does, then a turn of its own thread."""
        child_thread = self.codex.new_thread(parent=self.thread_id)
        call = {"type": "collabAgentToolCall", "id": self.codex.new_id("call"), "tool": "spawnAgent",
                "senderThreadId": self.thread_id, "receiverThreadIds": [child_thread], "status": "inProgress"}
        self.emit("item/started", item=call)
        self.emit("item/completed", item={**call, "status": "completed"})
        child = FakeTurn(self.codex, child_thread, self.codex.new_id("turn"))
        self.codex.emit("turn/started", {"threadId": child_thread,
                                         "turn": {"id": child.id, "rootTurnId": self.id,
                                                  "status": "inProgress"}})
        return child


class FakeCodex:
    """codex's side: threads, turns run by queued scripts, one live connection at a time."""

    def __init__(self) -> None:
        self.scripts: deque[Script] = deque()
        self.threads: set[str] = set()
        # thread id -> its cwd, approvalPolicy and sandbox (codex's thread/resume spelling)
        self.settings: dict[str, dict[str, Any]] = {}
        self.keeps_settings = False  # True: a codex that ignores thread/settings/update
        self.active: dict[str, FakeTurn] = {}  # thread id -> its running turn
        self.calls: list[tuple[str, dict[str, Any]]] = []  # every request, in order
        self.turn_started = asyncio.Event()
        self.dispatcher = FakeDispatcher(self)
        self._ids = itertools.count(1)

    def enqueue(self, *scripts: Script) -> None:
        self.scripts.extend(scripts)

    def new_id(self, prefix: str) -> str:
        return f"{prefix}-{next(self._ids)}"

    def new_thread(self, parent: str | None = None) -> str:
        thread_id = self.new_id("thr")
        self.threads.add(thread_id)
        self.emit("thread/started", {"thread": {"id": thread_id, "parentThreadId": parent}})
        return thread_id

    def emit(self, method: str, params: dict[str, Any]) -> None:
        self.dispatcher.emit(method, params)

    def lose_connection(self) -> None:
        """The app-server dies: everything on the connection fails; the next one is fresh."""
        for turn in self.active.values():
            if turn.task is not None:
                turn.task.cancel()
        self.active.clear()
        self.dispatcher.close("app-server connection lost")
        self.dispatcher = FakeDispatcher(self)

    # ------------------------------------------------------------------ requests

    async def handle(self, method: str, params: dict[str, Any]) -> Any:
        self.calls.append((method, params))
        handler = getattr(self, "_" + method.replace("/", "_"), None)
        if handler is None:
            raise RpcError(METHOD_NOT_FOUND, f"unknown method {method}")
        return handler(params)

    def _thread_start(self, params: dict[str, Any]) -> dict[str, Any]:
        thread_id = self.new_thread()
        self.settings[thread_id] = {"cwd": params.get("cwd"), "approvalPolicy": params.get("approvalPolicy"),
                                    "sandbox": sandbox_policy(params.get("sandbox") or "read-only")}
        return {"thread": {"id": thread_id}, "model": "fake-model", **self.settings[thread_id]}

    def _thread_resume(self, params: dict[str, Any]) -> dict[str, Any]:
        if params.get("threadId") not in self.threads:
            raise RpcError(INVALID_REQUEST, "no rollout found for thread id")
        # Like codex 0.171: a loaded thread keeps its own settings; the overrides are ignored.
        return {"thread": {"id": params["threadId"]}, "model": "fake-model",
                **self.settings.get(params["threadId"], {})}

    def _thread_settings_update(self, params: dict[str, Any]) -> dict[str, Any]:
        if not self.keeps_settings:
            self._apply_settings(params)
        return {}

    def _apply_settings(self, params: dict[str, Any]) -> None:
        held = self.settings.setdefault(str(params.get("threadId")), {})
        for key, name in (("cwd", "cwd"), ("approvalPolicy", "approvalPolicy"), ("sandboxPolicy", "sandbox")):
            if params.get(key) is not None:
                held[name] = params[key]

    def _thread_loaded_list(self, _params: dict[str, Any]) -> dict[str, Any]:
        return {"data": sorted(self.threads)}

    def _thread_inject_items(self, _params: dict[str, Any]) -> dict[str, Any]:
        return {}

    def _turn_start(self, params: dict[str, Any]) -> dict[str, Any]:
        thread_id = params.get("threadId")
        if thread_id not in self.threads:
            raise RpcError(INVALID_REQUEST, "thread not found")
        if not self.scripts:
            raise AssertionError("turn/start with no script queued (FakeCodex.enqueue)")
        if not self.keeps_settings:
            self._apply_settings(params)
        turn = FakeTurn(self, str(thread_id), self.new_id("turn"))
        self.active[turn.thread_id] = turn
        turn.task = asyncio.get_running_loop().create_task(self._run(turn, self.scripts.popleft()))
        return {"turn": {"id": turn.id, "status": "inProgress", "items": [], "error": None}}

    def _turn_steer(self, params: dict[str, Any]) -> dict[str, Any]:
        turn = self.active.get(str(params.get("threadId")))
        if turn is None or turn.id != params.get("expectedTurnId"):
            raise RpcError(INVALID_REQUEST, "expected active turn id does not match")
        turn.steers.put_nowait(params.get("input") or [])
        return {"turnId": turn.id}

    def _turn_interrupt(self, params: dict[str, Any]) -> dict[str, Any]:
        turn = self.active.get(str(params.get("threadId")))
        if turn is not None and turn.id == params.get("turnId") and turn.task is not None:
            turn.interrupted = True
            turn.task.cancel()
        return {}

    def _thread_turns_list(self, _params: dict[str, Any]) -> dict[str, Any]:
        return {"data": []}

    async def _run(self, turn: FakeTurn, script: Script) -> None:
        dispatcher = self.dispatcher  # a lost connection's turn reports nothing on the next one
        # codex answers turn/start first, then reports the turn: let the answer reach the caller.
        await asyncio.sleep(0)
        dispatcher.emit("turn/started", {"threadId": turn.thread_id, "turn": {"id": turn.id,
                                                                                "status": "inProgress"}})
        self.turn_started.set()
        status = "completed"
        try:
            await script(turn)
        except asyncio.CancelledError:
            if not turn.interrupted:
                return  # the connection was lost: nothing more is said on it
            status = "interrupted"
        if turn.error is not None:
            status = "failed"
        self.active.pop(turn.thread_id, None)
        error = {"message": turn.error} if turn.error else None
        dispatcher.emit("turn/completed", {"threadId": turn.thread_id,
                                           "turn": {"id": turn.id, "status": status, "error": error,
                                                    "items": []}})


class MemoryAppServer(contract.Supervisor):
    """What ``Runner`` uses of ``AppServer``: a live client on the fake's current connection."""

    child_pid = None  # no child: the runner's cancel sweep finds nothing of ours to end

    def __init__(self, codex: FakeCodex | None = None) -> None:
        self.codex = codex or FakeCodex()
        self.up = True

    async def client(self) -> AppServerClient:
        if not self.up:
            raise AppServerUnavailable("codex app-server is not running")
        return AppServerClient(self.codex.dispatcher, timeout_s=REQUEST_TIMEOUT_S)

    @property
    def status(self) -> dict[str, Any]:
        return {"available": self.up, "version": "fake", "transport": "memory", "fallbackFrom": None,
                "error": None}
