"""``AppServer``: owns the connection to codex app-server, supervises and restarts it.

The supervisor loop lives in a task group entered by ``__aenter__``. Each round opens a
connection (``connect.Connector``), runs the ``initialize`` handshake and publishes a
fresh ``AppServerClient``; when the connection ends (child killed, socket closed,
health probe failed) every request and listener on it has already failed with
``ConnectionClosed``, and the loop opens a new one. Failed starts back off with
jitter (``RestartBackoff``); a connection that stayed up resets the backoff.
``await app.client()`` waits for the live client and never hands out a dead one.

The typed client itself (``AppServerClient``) lives in ``methods``; it is re-exported
here because callers think of both as "the app-server client".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Self

from tenacity import RetryCallState

from boss_agent.appserver import contract
from boss_agent.appserver.connect import Connection, Connector
from boss_agent.appserver.first_start import first_start
from boss_agent.appserver.methods import AppServerClient, OverloadRetry
from boss_agent.appserver.routing import Notification, ServerRequest, ThreadListener
from boss_agent.appserver.rpc import RequestId
from boss_agent.backoff import RestartBackoff, failure
from boss_agent.codexversion import require_supported
from boss_agent.config import CodexSettings, Config
from boss_agent.errors import AppServerError, AppServerUnavailable
from boss_agent.lifecycles import SUPERVISOR, SupervisorState
from boss_agent.redact import sanitize_text

__all__ = ["AppServer", "AppServerClient", "Notification", "OverloadRetry", "RestartBackoff",
           "ServerRequest", "ThreadListener"]

logger = logging.getLogger(__name__)

# codex's cold start is 0.1-0.5 s on an idle machine; a loaded box and a listener start take longer.
STARTUP_TIMEOUT_S = 45.0
# How long client() waits for a (re)connect in progress before giving up.
CLIENT_WAIT_S = 30.0
# A connection that died sooner than this counts as a failed start (no backoff reset),
# so a crash-looping child is not restarted in a tight loop.
STABLE_AFTER_S = 5.0
# Teardown: the child gets EXIT_GRACE_S + TERM_GRACE_S (process.py); then we stop waiting.
TEARDOWN_TIMEOUT_S = 8.0
ERROR_CHARS = 200  # status errors are one short sanitized line
_USER_AGENT_VERSION = re.compile(r"^[^/\s]+/(\d[^\s]*)")


class AppServer(contract.Supervisor):
    """Shared by all concurrent tasks: threads are multiplexed on one connection."""

    def __init__(self, codex: CodexSettings, *, state_dir: Path, codex_home: Path | None = None,
                 overload_policy: OverloadRetry | None = None,
                 restart_policy: RestartBackoff | None = None,
                 ids: Callable[[], Iterator[RequestId]] | None = None) -> None:
        self.settings = codex
        self.connector = Connector(codex, state_dir=state_dir, codex_home=codex_home, ids=ids)
        self.overload_policy = overload_policy or OverloadRetry()
        self.restart_policy = restart_policy or RestartBackoff()
        self._client: AppServerClient | None = None
        self._conn: Connection | None = None
        self._state = SupervisorState.STARTING
        self._error: str | None = None
        self._version: str | None = None
        self._changed = asyncio.Event()
        self._group: asyncio.TaskGroup | None = None
        self._task: asyncio.Task[None] | None = None
        self.restarts = 0

    @classmethod
    def from_config(cls, config: Config, *, codex_home: Path | None = None) -> AppServer:
        return cls(config.codex, state_dir=config.state_dir, codex_home=codex_home)

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> Self:
        self._group = asyncio.TaskGroup()
        await self._group.__aenter__()
        self._task = self._group.create_task(self._supervise())
        # Readiness is the first attempt's outcome: up, or down with an error in status.
        try:
            async with asyncio.timeout(STARTUP_TIMEOUT_S):
                while self._state in (SupervisorState.STARTING, SupervisorState.RESTARTING):
                    await self._wait_change()
        except TimeoutError:
            logger.warning("codex app-server is not up after %s s; still trying", STARTUP_TIMEOUT_S)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._set_state(SupervisorState.STOPPED)  # every state may stop; a late step may not undo it
        if self._task is not None:
            self._task.cancel()
        try:
            async with asyncio.timeout(TEARDOWN_TIMEOUT_S):
                if self._group is not None:
                    await self._group.__aexit__(None, None, None)
        except TimeoutError:
            logger.warning("codex app-server teardown took over %s s; killing it", TEARDOWN_TIMEOUT_S)
            if self._conn is not None and self._conn.child is not None:
                self._conn.child.kill_group()  # bounded teardown: never leave codex behind
        finally:
            self._notify()

    async def client(self) -> AppServerClient:
        """The live, initialized client; waits for a (re)connect in progress."""
        try:
            async with asyncio.timeout(CLIENT_WAIT_S):
                while True:
                    live = self._client
                    if live is not None and not live.closed:
                        return live
                    if self._state in (SupervisorState.DOWN, SupervisorState.STOPPED):
                        raise AppServerUnavailable(self._error or "codex app-server is not running")
                    await self._wait_change()
        except TimeoutError:
            raise AppServerUnavailable("codex app-server did not come up in time") from None

    @property
    def child_pid(self) -> int | None:
        """Pid (= process group id) of the codex child we run, if any."""
        conn = self._conn
        return conn.child.pid if conn is not None and conn.child is not None else None

    @property
    def status(self) -> dict[str, Any]:
        conn = self._conn
        return {
            "available": self._state == SupervisorState.UP and self._client is not None and not self._client.closed,
            "version": self._version,
            "transport": conn.kind if conn is not None else self.settings.app_server_transport,
            "fallbackFrom": conn.fallback_from if conn is not None else None,
            "error": self._error or (conn.fallback_error if conn is not None else None),
        }

    # ------------------------------------------------------------------ supervision

    async def _supervise(self) -> None:
        # This task must never raise: the task group would cancel the daemon's own task.
        while True:
            try:
                async for attempt in self.restart_policy.retrying(before_sleep=self._went_down):
                    with attempt:
                        await self._run_once()
            except Exception:
                logger.exception("codex app-server supervisor failed; retrying")
                self._set_state(SupervisorState.DOWN)
                await asyncio.sleep(self.restart_policy.max_s)
                continue
            self._set_state(SupervisorState.RESTARTING)
            logger.warning("codex app-server connection lost; restarting it")

    async def _run_once(self) -> None:
        self._set_state(SupervisorState.RESTARTING if self.restarts or self._error
                        else SupervisorState.STARTING)
        # The first start on a fresh CODEX_HOME runs alone until initialize answered.
        starting = contextlib.AsyncExitStack()
        await starting.enter_async_context(first_start(self.connector.codex_home))
        try:
            conn = await self.connector.open()
        except BaseException:
            await starting.aclose()
            raise
        client = AppServerClient(conn.dispatcher, timeout_s=self.settings.request_timeout_s,
                                 policy=self.overload_policy)
        started = time.monotonic()

        async def startup() -> None:
            async with starting:
                init = await client.initialize()
            self._up(conn, client, init)

        self._conn = conn
        try:
            await conn.run(startup)
        except BaseExceptionGroup as group:
            raise _first_error(group) from None
        finally:
            self._client = None
            await starting.aclose()  # a start that failed before initialize answered
            await conn.close()
        self.restarts += 1
        if time.monotonic() - started < STABLE_AFTER_S:
            raise _ShortLived("codex app-server connection ended right after start")

    def _up(self, conn: Connection, client: AppServerClient, init: dict[str, Any]) -> None:
        match = _USER_AGENT_VERSION.match(str(init.get("userAgent", "")))
        self._version = match.group(1) if match else None
        require_supported(self._version)  # an app-server at a URL was not checked at start
        self._client, self._error = client, None
        self._set_state(SupervisorState.UP)
        logger.info("codex app-server %s up over %s%s", self._version or "(unknown version)",
                    conn.kind, f" (fallback from {conn.fallback_from})" if conn.fallback_from else "")

    def _went_down(self, state: RetryCallState) -> None:
        exc = failure(state)
        if isinstance(exc, _ShortLived):
            # It was up: callers keep waiting for the restart rather than failing fast.
            self._set_state(SupervisorState.RESTARTING)
            logger.warning("codex app-server connection lost soon after start; restarting it")
            return
        if exc is not None and not isinstance(exc, AppServerError):
            logger.error("codex app-server supervisor hit an unexpected %s", type(exc).__name__,
                         exc_info=exc)
        self._error = sanitize_text(str(exc) or type(exc).__name__, limit=ERROR_CHARS) if exc else None
        self._set_state(SupervisorState.DOWN)
        logger.warning("codex app-server unavailable (%s); retry %s", self._error, state.attempt_number)

    def _set_state(self, state: SupervisorState) -> None:
        if self._state != SupervisorState.STOPPED:  # stopping wins over a late supervisor step
            self._state = SUPERVISOR.check(self._state, state)
        self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def _wait_change(self) -> None:
        await self._changed.wait()


class _ShortLived(AppServerUnavailable):
    """A connection that came up but died before STABLE_AFTER_S: restart with backoff."""


def _first_error(group: BaseExceptionGroup) -> BaseException:
    """The first leaf of a task-group error, preferring our own errors."""
    leaves: list[BaseException] = []

    def walk(exc: BaseException) -> None:
        if isinstance(exc, BaseExceptionGroup):
            for inner in exc.exceptions:
                walk(inner)
        else:
            leaves.append(exc)

    walk(group)
    ours = [leaf for leaf in leaves if isinstance(leaf, AppServerError)]
    return (ours or leaves)[0]
