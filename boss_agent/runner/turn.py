"""One turn on codex app-server: start (or steer) it and follow it to ``turn/completed``.

The listener is registered before anything that could emit the turn's
notifications (``thread/resume``, ``turn/start``, ``turn/steer``). Every message
is reduced into the card; approval requests are answered in the same task group
as the notification loop, so a pending approval never stops the card. Cancel
interrupts the turn, ends the commands it left running, and waits a bounded
time for Codex to report the turn interrupted.

The boundary that matters for fallbacks: until ``turn/start`` has been sent,
a failure is ``TurnNotStarted`` and another backend may run the task; after
that, a lost app-server fails the task (``app_server_lost``) — never a second run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from boss_agent.appserver.routing import Notification, ServerRequest, ThreadListener
from boss_agent.errors import (
    AppServerError,
    RpcError,
    ServerOverloaded,
    TaskFailed,
    TurnNotActive,
    TurnNotStarted,
)
from boss_agent.jsonshape import mapping
from boss_agent.redact import sanitize_text
from boss_agent.runner.approval_requests import APPROVAL_METHODS, Approvals
from boss_agent.runner.context import MAX_RESULT_CHARS, RunContext
from boss_agent.runner.cancel_sweep import kill_turn_processes
from boss_agent.runner.subagents import SubAgents
from boss_agent.tasks import Status

if TYPE_CHECKING:
    from boss_agent.appserver.protocol import McpServerStartupState, ThreadItem, Turn
    from boss_agent.appserver.contract import Client
    from boss_agent.runner.thread_ahead import ThreadsAhead

logger = logging.getLogger(__name__)
T = TypeVar("T")

INTERRUPT_GRACE_S = 15.0  # after turn/interrupt codex reports the turn within ms; this bounds a wedged one
UNSUPPORTED_REQUEST = -32601
ASKED_ABOUT = frozenset({"fileChange", "mcpToolCall", "dynamicToolCall"})  # items an approval names
THREAD_NOT_FOUND = "thread_not_found"
THREAD_LIMITS_UNENFORCEABLE = "thread_limits_unenforceable"
MCP_READY_TIMEOUT_S = 30.0  # cua-driver starts in well under a second; a wedged one must not hang the task
# codex 0.169+ applies a steer within ~10 ms; before, it waits for the model's response
# in flight (seconds). Past this the steer's card says it is queued.
STEER_APPLY_GRACE_S = 2.0
STEER_QUEUED = "the steer is queued: this codex applies it when the model's response in progress ends"


@dataclass
class TurnOutcome:
    status: Status
    error_code: str | None = None
    error_message: str | None = None
    last_answer: str | None = None


def _turn_error(turn: Turn) -> str:
    error = mapping(turn.get("error"))
    return str(error.get("message") or "the Codex turn failed")


def _known(value: str | None, what: str) -> str:
    """An id the order of calls guarantees (set before any call needs it); None is a bug."""
    if value is None:
        raise AssertionError(f"the {what} is not known yet")
    return value


class AppServerTurn:
    def __init__(self, ctx: RunContext, client: Client, *, ahead: ThreadsAhead | None = None) -> None:
        self.ctx = ctx
        self.client = client
        self.ahead = ahead  # a new thread may be one made ahead (runner/thread_ahead.py)
        self.turn_sent = False
        self._calls: set[str] = set()  # this turn's commandExecution item ids
        # The items an approval may be about (a patch's changes, a tool call's arguments),
        # by id, from item/started until item/completed: codex asks after announcing them.
        self._asked_about: dict[str, ThreadItem] = {}
        self._last_answer: str | None = None
        self._interrupting = False
        self._user_message = asyncio.Event()  # a userMessage item reached the card (a steer applied)

    @property
    def _thread(self) -> str:
        """The thread id: the runner (resume, steer) or thread/start sets it before any turn call."""
        return _known(self.ctx.thread_id, "thread id")

    # ------------------------------------------------------------------ entry points

    async def run(self, *, config: dict[str, Any] | None = None,
                  inject: list[dict[str, Any]] | None = None,
                  mcp_server: str | None = None) -> TurnOutcome:
        """Resume ``ctx.thread_id`` (or start a new thread), optionally inject items, run a turn.

        ``mcp_server``: wait until that thread-level MCP server reports ready (or failed)
        before the turn; its tools are searched for on the first model request.
        """
        extra = {"config": config} if config else {}
        ctx = self.ctx
        if ctx.thread_id:
            async with self.client.listen(ctx.thread_id) as listener:
                await self._resume(extra)
                if mcp_server:
                    await self._mcp_ready(listener, mcp_server)
                return await self._start_and_follow(listener, inject)
        if not mcp_server:
            started = await self._new_thread(extra)
            ctx.thread_id = started["thread"]["id"]
            ctx.model = started.get("model")
            # thread/start's own notifications are not needed; nothing of the turn is emitted yet.
            async with self.client.listen(self._thread) as listener:
                return await self._start_and_follow(listener, inject)
        # MCP start-up is announced right after thread/start, possibly before its id is known
        # here: a catch-all listener spans that gap and is dropped before the turn.
        async with contextlib.AsyncExitStack() as catch_all:
            everything = await catch_all.enter_async_context(self.client.listen_all())
            started = await self._before_turn(self.client.thread_start(**ctx.thread_params(), **extra))
            ctx.thread_id = started["thread"]["id"]
            ctx.model = started.get("model")
            async with self.client.listen(self._thread) as listener:
                await self._mcp_ready(everything, mcp_server)
                await catch_all.aclose()  # dropped before the turn starts
                return await self._start_and_follow(listener, inject)

    async def _new_thread(self, extra: dict[str, Any]) -> dict[str, Any]:
        """The task's new thread: one made ahead under exactly its parameters, else one
        made now (``thread/start``'s answer either way)."""
        params = self.ctx.thread_params()
        if self.ahead is not None and not extra:
            made = await self.ahead.take(self.client, self.ctx.config, params)
            if made is not None:
                return made
        return await self._before_turn(self.client.thread_start(**params, **extra))

    async def _mcp_ready(self, listener: ThreadListener, server: str) -> None:
        try:
            async with asyncio.timeout(MCP_READY_TIMEOUT_S):
                async for message in listener:
                    params = message.params if isinstance(message.params, dict) else {}
                    if (not isinstance(message, Notification) or message.method != "mcpServer/startupStatus/updated"
                            or params.get("threadId") != self.ctx.thread_id or params.get("name") != server):
                        continue
                    await self.ctx.feed.feed(message.raw)
                    status: McpServerStartupState | None = params.get("status")
                    if status in ("ready", "failed", "cancelled"):
                        return
        except TimeoutError:
            logger.warning("MCP server %s did not report ready; starting the turn anyway", server)
        except AppServerError as exc:
            raise TurnNotStarted(exc) from exc

    async def steer(self) -> TurnOutcome:
        ctx = self.ctx
        expected = ctx.task.target_turn_id
        if not expected:
            raise TurnNotActive("a steer must name the turn it joins (targetCodexTurnId)")
        await ctx.ready_to_act()
        async with self.client.listen(self._thread) as listener:
            try:
                await self.client.turn_steer(self._thread, expected, ctx.input())
            except TurnNotActive:
                raise
            except RpcError as exc:
                raise TurnNotActive(sanitize_text(exc.message, limit=300)) from exc
            ctx.turn_began(expected)
            # The steer's output arrives on the original turn; its task answers the approvals.
            return await self._follow(listener, answer_approvals=False, steering=True)

    # ------------------------------------------------------------------ internals

    async def _resume(self, extra: dict[str, Any]) -> None:
        ctx = self.ctx
        try:
            resumed = await self.client.thread_resume(self._thread, excludeTurns=True,
                                                      **ctx.thread_params(), **extra)
        except RpcError as exc:
            refused = exc
        except AppServerError as exc:
            raise TurnNotStarted(exc) from exc
        else:
            ctx.model = (resumed or {}).get("model")
            if not ctx.limits_hold(resumed):
                # codex kept the loaded thread's own folder and limits: set this task's.
                await self._restate_limits(confirm=True)
            return
        # A thread started here that has no turn yet has no rollout to resume from, but it
        # is loaded and usable once it has this task's limits.
        loaded = await self._before_turn(self.client.call("thread/loaded/list", {}))
        if ctx.thread_id in (loaded or {}).get("data", []):
            await self._restate_limits(confirm=False)
            return
        if isinstance(refused, ServerOverloaded):
            raise TurnNotStarted(refused) from refused
        # codex answered and has no such thread: no backend may turn this follow-up into a
        # new, unrelated thread (codex exec resume of an unknown name starts one).
        raise TaskFailed("this device has no Codex thread with that reference", THREAD_NOT_FOUND) from refused

    async def _restate_limits(self, *, confirm: bool) -> None:
        """Give a thread codex holds this task's folder, approval policy and sandbox before
        any turn; ``confirm``: read them back (a rejoining ``thread/resume`` reports them).

        A codex that refuses, or reports other limits, fails the task: a follow-up never
        runs under an earlier turn's limits. (turn/start restates them as well.)
        """
        ctx = self.ctx
        try:
            await self.client.call("thread/settings/update", {"threadId": self._thread, **ctx.limits()})
            held = await self.client.thread_resume(self._thread, excludeTurns=True) if confirm else None
        except RpcError as exc:
            raise TaskFailed("Codex would not apply this device's limits to the thread",
                             THREAD_LIMITS_UNENFORCEABLE) from exc
        except AppServerError as exc:
            raise TurnNotStarted(exc) from exc
        if confirm and not ctx.limits_hold(held):
            raise TaskFailed("Codex kept the thread's earlier folder or limits", THREAD_LIMITS_UNENFORCEABLE)

    async def _before_turn(self, call: Awaitable[T]) -> T:
        try:
            return await call
        except AppServerError as exc:
            raise TurnNotStarted(exc) from exc

    async def _start_and_follow(self, listener: ThreadListener, inject: list[dict[str, Any]] | None) -> TurnOutcome:
        ctx = self.ctx
        await ctx.ready_to_act()  # the source's record first: a turn never runs twice
        if inject:
            await self._before_turn(self.client.thread_inject_items(self._thread, inject))
        if ctx.cancel.is_set():
            return TurnOutcome("cancelled", "cancelled", "the task was cancelled before it started")
        self.turn_sent = True
        try:
            started = await self.client.turn_start(self._thread, ctx.input(), **ctx.turn_params())
        except RpcError as exc:  # codex answered: no turn exists, so another backend may run
            self.turn_sent = False
            raise TurnNotStarted(exc) from exc
        except AppServerError as exc:  # no answer, and codex could not show that nothing ran
            logger.warning("turn/start unanswered (%s); the task fails rather than run twice",
                           exc.__class__.__name__)
            return TurnOutcome("failed", "app_server_lost", "the Codex app-server went away during the turn")
        turn_id: str = started["turn"]["id"]
        listener.claim_turn(turn_id)  # its approvals are this task's, whoever else listens
        ctx.turn_began(turn_id)
        if ctx.thread_id is not None:
            await ctx.sink.turn_started(ctx.thread_id, turn_id)
        return await self._follow(listener, answer_approvals=True)

    async def _follow(self, listener: ThreadListener, *, answer_approvals: bool,
                      steering: bool = False) -> TurnOutcome:
        ctx = self.ctx
        approvals = Approvals(task_id=ctx.task.task_id, attempt=ctx.task.attempt, feed=ctx.feed, sink=ctx.sink,
                              approval_mode=ctx.policy.approval_mode,
                              timeout_s=ctx.config.codex.approval_timeout_s, workdir=str(ctx.workdir),
                              sandbox=ctx.policy.sandbox, items=self._asked_about)
        failure: BaseException | None = None
        turn: Turn | None = None
        try:
            # The deadline stays open until a cancel; then it bounds the wait for turn/completed.
            async with asyncio.timeout(None) as deadline, asyncio.TaskGroup() as tg:
                watcher = tg.create_task(self._watch_cancel(deadline))
                queued = tg.create_task(self._note_queued_steer()) if steering else None
                try:
                    turn = await self._loop(listener, tg, approvals, answer_approvals)
                except AppServerError as exc:
                    failure = exc
                finally:
                    if queued is not None:
                        queued.cancel()
                    approvals.cancel_all("cancelled" if ctx.cancel.is_set() else "turn_ended")
                    if not self._interrupting:
                        watcher.cancel()
                    # else: let it finish killing the turn's processes before the task reports.
        except TimeoutError as exc:
            failure = exc
        return self._outcome(turn, failure)

    async def _loop(self, listener: ThreadListener, tg: asyncio.TaskGroup, approvals: Approvals,
                    answer_approvals: bool) -> Turn | None:
        children = SubAgents(self.ctx.thread_id, self.ctx.feed)
        async for message in listener:
            if not hasattr(message, "raw"):  # a server request (the parent's or a sub-agent's)
                await self._server_request(message, tg, approvals, answer_approvals)
                continue
            params = message.params if isinstance(message.params, dict) else {}
            if children.is_child(params):
                await children.note(message.method, params, message.raw)
                if message.method in ("item/started", "item/completed"):
                    self._note_item(params.get("item"), answer=False, done=message.method == "item/completed")
                elif message.method == "serverRequest/resolved":
                    approvals.resolved(params.get("requestId"))
                continue
            await self.ctx.feed.feed(message.raw)
            if message.method == "serverRequest/resolved":
                approvals.resolved(params.get("requestId"))
            elif message.method in ("item/started", "item/completed"):
                self._note_item(params.get("item"), done=message.method == "item/completed")
            elif message.method == "turn/completed":
                turn: Turn | None = params.get("turn")
                if turn and turn.get("id") == self.ctx.turn_id:
                    return turn
        return None

    async def _server_request(self, request: ServerRequest, tg: asyncio.TaskGroup, approvals: Approvals,
                              answer_approvals: bool) -> None:
        await self.ctx.feed.feed({"id": request.id, "method": request.method, "params": request.params})
        if request.method in APPROVAL_METHODS:
            if answer_approvals:
                approvals.start(tg, request)
            return
        if request.method == "item/tool/call":  # no dynamic tools are registered by boss-agent
            await request.respond({"contentItems": [], "success": False})
        elif request.method == "currentTime/read":  # codex 0.150 … 0.169 ask the client's clock
            await request.respond({"currentTimeAt": int(time.time())})
        else:
            await request.fail(UNSUPPORTED_REQUEST, "not supported by boss-agent")

    def _note_item(self, item: ThreadItem | None, *, answer: bool = True, done: bool = False) -> None:
        if not item or "type" not in item:  # not an item codex's schema describes
            return
        if item["type"] in ASKED_ABOUT and isinstance(item.get("id"), str):
            if done:
                self._asked_about.pop(item["id"], None)
            else:
                self._asked_about[item["id"]] = item
        # item["type"] (not .get) narrows the union, so mypy checks each variant's fields.
        if item["type"] == "commandExecution":
            if isinstance(item.get("id"), str):
                self._calls.add(item["id"])
        elif answer and item["type"] == "agentMessage" and item.get("text"):
            self._last_answer = item["text"]
        elif answer and item["type"] == "userMessage":
            self._user_message.set()

    async def _note_queued_steer(self) -> None:
        """Say on the steer's card when codex holds the steer back (before 0.169)."""
        try:
            async with asyncio.timeout(STEER_APPLY_GRACE_S):
                await self._user_message.wait()
        except TimeoutError:
            logger.info("the steer is queued behind the model's response in progress")
            await self.ctx.feed.event("warning", kind="steerQueued", message=STEER_QUEUED)

    async def _watch_cancel(self, deadline: asyncio.Timeout) -> None:
        ctx = self.ctx
        await ctx.cancel.wait()
        self._interrupting = True
        deadline.reschedule(asyncio.get_running_loop().time() + INTERRUPT_GRACE_S)
        try:
            await self.client.turn_interrupt(self._thread, _known(ctx.turn_id, "turn id"))
        except AppServerError as exc:
            logger.info("turn/interrupt failed (%s); ending the commands anyway", exc.__class__.__name__)
        # codex leaves interrupted exec processes running (facts 3f): end them here.
        killed = await asyncio.to_thread(kill_turn_processes, ctx.thread_id, self._calls,
                                         ctx.app_server_pid(), ctx.started_at)
        if killed:
            logger.info("ended %d process(es) the interrupted turn left running", killed)

    def _outcome(self, turn: Turn | None, failure: BaseException | None) -> TurnOutcome:
        answer = self._last_answer
        if self._interrupting:
            return TurnOutcome("cancelled", "cancelled", "the task was cancelled", answer)
        if failure is not None or turn is None:
            logger.warning("app-server lost during a turn: %s",
                           failure.__class__.__name__ if failure else "stream ended")
            return TurnOutcome("failed", "app_server_lost",
                               "the Codex app-server went away during the turn", answer)
        status = turn.get("status")
        if status == "completed":
            return TurnOutcome("completed", last_answer=answer)
        if status == "interrupted":
            return TurnOutcome("failed", "codex_turn_interrupted", "the Codex turn was interrupted", answer)
        message = sanitize_text(_turn_error(turn), workdir=self.ctx.workdir, limit=MAX_RESULT_CHARS)
        return TurnOutcome("failed", "codex_turn_failed", message, answer)

