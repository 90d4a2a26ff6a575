"""The task runner: one ``Task`` in, one ``TaskResult`` out, the card fed on the way.

It picks the path (steer, thread collaboration, computer use, or a plain turn),
runs it on the shared app-server, falls back to ``codex exec`` only while no
turn has started (for computer use: Codex's own, else the CUA driver, else
``codex exec`` carrying the driver), and adds the branch and artifact facts after the turn. It
knows nothing of HTTP or Redis: the ``TaskSink`` is its only way out.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from boss_agent.aio import race
from boss_agent.codexbin import codex_version, find_codex, resolve_native
from boss_agent.codexfeatures import THREAD_UNLOAD_SINCE
from boss_agent.codexversion import at_least
from boss_agent.config import Config
from boss_agent.errors import (
    AppServerError,
    AppServerUnavailable,
    ConnectionClosed,
    TaskFailed,
    TaskRejected,
    TurnNotStarted,
)
from boss_agent.progress.bounds import cut_result_text
from boss_agent.progress.card import final_answer
from boss_agent.redact import sanitize_text
from boss_agent.runner import collaboration, cua, gitfacts
from boss_agent.runner.context import MAX_RESULT_CHARS, RunContext
from boss_agent.runner.exec_backend import ExecRun, codex_home as codex_home_of
from boss_agent.runner.feed import CardFeed
from boss_agent.runner.policy import in_scratch, resolve_policy, resolve_workdir
from boss_agent.runner.thread_ahead import ThreadsAhead
from boss_agent.runner.turn import AppServerTurn, TurnOutcome
from boss_agent.tasks import Backend, Task, TaskResult, TaskSink, check_refs
from boss_agent.timefmt import utc_iso

if TYPE_CHECKING:
    from boss_agent.appserver.contract import Client, Supervisor

logger = logging.getLogger(__name__)

# codex dying under a thread/start or thread/resume leaves nothing run: the task waits
# for the supervisor's restart and tries once more there before any fallback.
APP_SERVER_ATTEMPTS = 2


class Runner:
    """Implements ``boss_agent.tasks.TaskRunner``."""

    def __init__(self, config: Config, app: Supervisor, *, codex_home: Path | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.config = config
        self.app = app
        self.env = dict(env or {})
        if codex_home is not None:
            self.env["CODEX_HOME"] = str(codex_home)
        self._gh_status: str | None = None
        # Tasks finishing together would each find the status unknown and each spawn
        # `gh auth status` (a round trip to GitHub); the first probes, the rest wait for it.
        self._gh_lock = asyncio.Lock()
        self._capabilities: dict[str, Any] | None = None
        self._codex_computer_use = False
        self.ahead = ThreadsAhead(codex_home_of(self.env))  # codex.thread_ahead

    async def aclose(self) -> None:
        """Before the app-server closes: no thread is being made ahead any more."""
        await self.ahead.aclose()

    # ---------------------------------------------------------------- public

    async def run(self, task: Task, sink: TaskSink, cancel: asyncio.Event) -> TaskResult:
        try:
            check_refs(task)
            workdir = resolve_workdir(task, self.config)
        except TaskRejected as exc:
            logger.info("task %s refused: %s", task.task_id, exc.code)
            return await self._finish(CardFeed(sink, backend="app_server", workdir=None),
                                      TaskResult("failed", error_code=exc.code, error_message=str(exc)), None)
        policy = resolve_policy(task, self.config)
        feed = CardFeed(sink, backend="app_server", workdir=str(workdir))
        ctx = RunContext(task, self.config, sink, cancel, workdir, policy, feed,
                         thread_id=task.codex_thread_ref, app_server_pid=self._app_server_pid)
        for kind, message in policy.warnings:
            await feed.event("warning", kind=kind, message=message)
        # The limits this task's turn runs under, whatever the thread ran under before.
        await feed.event("limits", approvalPolicy=policy.approval_policy, sandbox=policy.sandbox)
        await feed.status("running")
        try:
            result = await self._dispatch(ctx)
        except TaskFailed as exc:
            result = self._failed(ctx, exc.code, str(exc))
        except Exception:  # a bug here must fail this one task, never the daemon
            logger.exception("task %s crashed in the runner", task.task_id)
            result = self._failed(ctx, "internal_error", "boss-agent failed while running the task")
        if ctx.ran:
            await self._after_turn(ctx)
        return await self._finish(feed, result, ctx)

    @property
    def capabilities(self) -> dict[str, Any]:
        """For the heartbeat: what this device can run. Computed once, then cached."""
        if self._capabilities is None:
            self._capabilities = self._probe_capabilities()
        caps = self._capabilities
        return {**caps, "computerUse": {**caps["computerUse"], "codex": self._codex_computer_use}}

    async def refresh_capabilities(self) -> dict[str, Any]:
        """Re-probe (off the event loop), including the CUA driver's health."""
        self._capabilities = await asyncio.to_thread(self._probe_capabilities)
        health = await cua.driver_health(cua.find_driver(self.config.cua_bin))
        self._capabilities["computerUse"]["cuaDriver"] = {"available": health.available,
                                                          "version": health.version}
        if self.app.status.get("available"):
            try:
                self._codex_computer_use = await cua.codex_has_computer_use(await self.app.client())
            except AppServerError:
                pass  # keep the last answer; the next refresh asks again
        return self.capabilities

    def _app_server_pid(self) -> int | None:
        return self.app.child_pid

    # ---------------------------------------------------------------- paths

    async def _dispatch(self, ctx: RunContext) -> TaskResult:
        if ctx.cancel.is_set():
            return _cancelled_before_start()
        task = ctx.task
        if task.target_turn_id:
            return await self._steer(ctx)
        if task.intent == "thread_collaboration":
            return await self._collaborate(ctx)
        if task.intent == "computer_use":
            return await self._computer_use(ctx)
        return await self._turn_with_fallback(ctx)

    async def _client(self) -> Any:
        try:
            return await self.app.client()
        except AppServerError as exc:
            raise TaskFailed("the Codex app-server is not available", "app_server_unavailable") from exc

    async def _steer(self, ctx: RunContext) -> TaskResult:
        if not ctx.thread_id:
            raise TaskRejected("a steer needs codexThreadRef (the thread of the turn)")
        outcome = await AppServerTurn(ctx, await self._client()).steer()
        return self._result(ctx, outcome, "app_server")

    async def _collaborate(self, ctx: RunContext) -> TaskResult:
        client = await self._client()
        items = await collaboration.read_source(client, ctx.task.source_thread_ref or "")
        summary = collaboration.build_summary(items, workdir=str(ctx.workdir))
        if summary is None:
            raise TaskFailed("the source thread has no answer to share yet", "source_thread_empty")
        ctx.thread_id = ctx.task.target_thread_ref
        try:
            outcome = await AppServerTurn(ctx, client).run(inject=collaboration.inject_items(summary))
        except TurnNotStarted as exc:
            raise TaskFailed("the target thread could not be prepared", "app_server_unavailable") from exc
        return self._result(ctx, outcome, "app_server")

    async def _computer_use(self, ctx: RunContext) -> TaskResult:
        """Codex's own computer use first; the CUA driver when it is absent or fails to start.

        Only failures before ``turn/start`` fall back: a turn that started is never run again.
        """
        try:
            client = await self.app.client()
        except AppServerError:
            logger.info("app-server unavailable for a computer-use task; trying codex exec")
            return await self._cua_exec(ctx)
        plugin = await cua.codex_computer_use_plugin(client)
        self._codex_computer_use = plugin is not None
        if plugin is None:
            return await self._cua_turn(ctx, client)
        failure = await cua.plugin_start_error(client, plugin)
        if failure is None:
            try:
                outcome = await AppServerTurn(ctx, client).run()
                return self._result(ctx, outcome, "app_server")
            except TurnNotStarted as exc:
                failure = f"the turn did not start ({exc.cause.__class__.__name__})"
                ctx.thread_id = ctx.task.codex_thread_ref  # the CUA turn starts its own thread
        logger.info("Codex computer use failed before the turn: %s", failure)
        await ctx.feed.event("warning", kind="fallback", message=sanitize_text(
            f"Codex computer use failed before it started ({failure}); using the CUA driver instead",
            workdir=ctx.workdir, limit=MAX_RESULT_CHARS))
        return await self._cua_turn(ctx, client)

    async def _cua_driver(self) -> str:
        binary = cua.find_driver(self.config.cua_bin)
        health = await cua.driver_health(binary)
        if "cua" not in self.config.codex.fallback or not health.available or not binary:
            reason = health.reason or "the cua fallback is disabled on this device"
            raise TaskFailed(f"computer use is not available: {reason}", "computer_use_unavailable")
        return binary

    async def _cua_turn(self, ctx: RunContext, client: Client) -> TaskResult:
        binary = await self._cua_driver()
        await ctx.feed.event("backend", backend="cua")
        try:
            outcome = await AppServerTurn(ctx, client).run(config=cua.mcp_config(binary),
                                                           mcp_server=cua.MCP_SERVER_NAME)
        except TurnNotStarted as exc:
            logger.info("app-server failed before the desktop turn (%s)", exc.cause.__class__.__name__)
            ctx.thread_id = ctx.task.codex_thread_ref  # exec resumes only a thread with a turn
            return await self._cua_exec(ctx)
        return self._result(ctx, outcome, "cua", fallback_from="app_server")

    async def _cua_exec(self, ctx: RunContext) -> TaskResult:
        """No app-server: ``codex exec`` carrying the same CUA MCP server, under the exec rule."""
        if "exec" not in self.config.codex.fallback:
            raise TaskFailed("the Codex app-server is not available", "app_server_unavailable")
        await self._check_exec_allowed(ctx)
        binary = await self._cua_driver()
        return await self._exec(ctx, overrides=cua.exec_overrides(binary))

    async def _turn_with_fallback(self, ctx: RunContext) -> TaskResult:
        for attempt in range(1, APP_SERVER_ATTEMPTS + 1):
            try:
                client = await self._restarted_client(ctx) if attempt > 1 else await self.app.client()
                ahead = self.ahead if self._threads_ahead(ctx) else None
                outcome = await AppServerTurn(ctx, client, ahead=ahead).run()
                if ahead is not None and not ctx.cancel.is_set():
                    ahead.make(client, ctx.config, ctx.thread_params())  # for the next task like it
                return self._result(ctx, outcome, "app_server")
            except (AppServerUnavailable, TurnNotStarted) as exc:
                cause = exc.cause if isinstance(exc, TurnNotStarted) else exc
                logger.info("app-server failed before the turn (%s)", cause.__class__.__name__)
                if not isinstance(cause, ConnectionClosed) or ctx.cancel.is_set():
                    break
                # Only thread/start or thread/resume can have failed this way (a lost
                # turn/start is app_server_lost): no turn was sent, nothing ran.
                ctx.thread_id = ctx.task.codex_thread_ref
        if ctx.cancel.is_set():
            return _cancelled_before_start()
        if "exec" not in self.config.codex.fallback:
            raise TaskFailed("the Codex app-server is not available", "app_server_unavailable")
        return await self._exec(ctx)

    def _threads_ahead(self, ctx: RunContext) -> bool:
        """Whether this task may take, and leave, a thread made ahead: not in a scratch
        folder (a new one each task), and only on a codex that unloads a thread let go."""
        return (not in_scratch(ctx.config, ctx.workdir)
                and at_least(self.app.status.get("version"), THREAD_UNLOAD_SINCE))

    async def _restarted_client(self, ctx: RunContext) -> Client:
        """The client of the restarted app-server (``AppServer.client`` waits for the
        restart in progress, bounded); a cancel ends the wait."""
        client, _ = await race(self.app.client(), ctx.cancel.wait())
        if client.cancelled():
            raise TurnNotStarted(AppServerUnavailable("cancelled while codex restarted"))
        return client.result()

    async def _check_exec_allowed(self, ctx: RunContext) -> None:
        if ctx.policy.approval_policy != "never":
            # exec cannot ask: running here would answer every approval with "yes".
            message = (f"the Codex app-server is unavailable and codex exec cannot ask for approvals "
                       f"(approval policy {ctx.policy.approval_policy}); the task did not run")
            await ctx.feed.event("warning", kind="fallback", message=message)
            raise TaskFailed(message, "approval_unavailable")

    async def _exec(self, ctx: RunContext, overrides: Sequence[str] = ()) -> TaskResult:
        await self._check_exec_allowed(ctx)
        try:
            binary = resolve_native(find_codex(self.config.codex.bin))
        except AppServerUnavailable as exc:
            raise TaskFailed("neither the Codex app-server nor codex exec can run",
                             "app_server_unavailable") from exc
        carrying = " with the CUA driver" if overrides else ""
        await ctx.feed.event("warning", kind="fallback",
                             message=f"the Codex app-server was unavailable; ran codex exec{carrying} instead")
        await ctx.feed.event("backend", backend="exec")
        outcome = await ExecRun(ctx, binary, self.env, overrides).run()
        return self._result(ctx, outcome, "exec", fallback_from="app_server")

    # ---------------------------------------------------------------- results

    def _result(self, ctx: RunContext, outcome: TurnOutcome, backend: Backend,
                fallback_from: Backend | None = None) -> TaskResult:
        answer = final_answer(ctx.feed.card) or (
            sanitize_text(outcome.last_answer, workdir=ctx.workdir, limit=MAX_RESULT_CHARS)
            if outcome.last_answer else None)
        return TaskResult(
            status=outcome.status, backend=backend, fallback_from=fallback_from,
            codex_thread_ref=ctx.thread_id, turn_id=ctx.turn_id,
            result_text=cut_result_text(answer) if outcome.status == "completed" else None,
            error_code=outcome.error_code if outcome.status != "completed" else None,
            error_message=outcome.error_message if outcome.status != "completed" else None,
        )

    def _failed(self, ctx: RunContext, code: str, message: str) -> TaskResult:
        return TaskResult("failed", backend=None, codex_thread_ref=ctx.thread_id, turn_id=ctx.turn_id,
                          error_code=code, error_message=sanitize_text(message, workdir=ctx.workdir))

    async def _after_turn(self, ctx: RunContext) -> None:
        try:
            if gitfacts.has_own_git(ctx.workdir):
                # The git probes and the artifact walk are independent: side by side, the
                # task ends after the slower of the two, not after both.
                async with asyncio.TaskGroup() as tg:
                    branch = tg.create_task(self._branch_facts(ctx.workdir))
                    found = tg.create_task(gitfacts.artifacts(ctx.workdir, ctx.started_at))
                facts, artifacts = branch.result(), found.result()
            else:  # not a repository: neither git nor gh is worth a spawn
                facts, artifacts = None, await gitfacts.artifacts(ctx.workdir, ctx.started_at)
            if facts:
                await ctx.feed.event("branch", **facts)
            if artifacts:
                await ctx.feed.event("artifacts", artifacts=artifacts)
        except Exception as exc:  # noqa: BLE001 - facts are a nicety; they never fail the task
            logger.warning("reading branch facts failed: %s", exc.__class__.__name__)
        try:  # the thread's folder, for its next follow-up, is on disk before the result goes out
            await ctx.thread_recorded()
        except Exception:  # a bug here must fail neither the task nor the daemon
            logger.exception("recording the thread's folder failed")

    async def _branch_facts(self, workdir: Path) -> dict[str, Any] | None:
        async with self._gh_lock:
            if self._gh_status is None:
                self._gh_status = await gitfacts.github_cli()
        return await gitfacts.branch_facts(workdir, self._gh_status)

    async def _finish(self, feed: CardFeed, result: TaskResult, ctx: RunContext | None) -> TaskResult:
        if result.error_message:
            workdir = ctx.workdir if ctx else None
            result.error_message = sanitize_text(result.error_message, workdir=workdir)
        if result.backend is None and ctx is not None and ctx.ran:
            result.backend = "app_server"
        await feed.event("finished", status=result.status, at=utc_iso(ms=True))
        result.execution_progress = feed.to_dict()
        if ctx is not None:
            logger.info("task %s finished %s (backend %s)", ctx.task.task_id, result.status, result.backend)
        return result

    def _probe_capabilities(self) -> dict[str, Any]:
        try:
            path = find_codex(self.config.codex.bin)
            exec_cap = {"available": True, "version": codex_version(path)}
        except AppServerUnavailable:
            exec_cap = {"available": False, "version": None}
        driver = cua.find_driver(self.config.cua_bin)
        return {"codexExec": exec_cap,
                "computerUse": {"codex": self._codex_computer_use,
                                "cuaDriver": {"available": driver is not None, "version": None}}}


def _cancelled_before_start() -> TaskResult:
    return TaskResult("cancelled", error_code="cancelled",
                      error_message="the task was cancelled before it started")


__all__ = ["Runner"]
