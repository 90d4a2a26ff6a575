"""The Daemon: owns the one task group every long-lived piece of boss-agent runs in.

``Daemon.run`` takes the state dir's single-instance lock, recovers the tasks a dead
daemon left, starts the codex app-server (unless a runner was injected), the
discovery refresh loop, the Boss source (heartbeat, claim, spool flusher, task runs),
the state-file writer and, when configured, the Redis gateway; then it signals
readiness (``ready`` and systemd ``READY=1``) and waits for a stop request.

Shutdown follows uvicorn: SIGTERM/SIGINT stops claiming, running tasks get
``grace_period_s`` to finish, then their cancel events are set (the runner interrupts
the turn and reports ``cancelled``); a second signal, or runs that ignore the cancel,
are cancelled outright and spooled as ``cancelled``. The spool gets one bounded
delivery attempt before exit; the rest waits for the next start.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import signal
import socket
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from boss_agent import __version__
from boss_agent.config import Config
from boss_agent.errors import AlreadyRunning, StateError
from boss_agent.identity import ensure_state_dir, load_identity, write_atomic
from boss_agent.sources.boss import BossSource, RetryPolicy
from boss_agent.sysinfo import system_facts
from boss_agent.tasks import TaskRunner

logger = logging.getLogger(__name__)

LOCK_FILE = "daemon.lock"
STATE_FILE = "state.json"
STATE_WRITE_S = 5.0  # `boss-agent status` is at most this stale
DISCOVERY_RETRY_S = 60.0  # after a failed discovery; the cache TTL paces the successful ones
CANCEL_GRACE_S = 10.0  # after the cancel events: how long the runner may take to interrupt
FINAL_FLUSH_S = 5.0  # shutdown must stay bounded; the spool survives for the next start


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def sd_notify(message: str) -> None:
    """Tell systemd (Type=notify) about us; a no-op outside systemd."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return
    if address.startswith("@"):
        address = "\0" + address[1:]
    with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.sendto(message.encode(), address)


class _InstanceLock:
    """One daemon per state dir: an exclusive flock held for the daemon's lifetime."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / LOCK_FILE
        self.fd: int | None = None

    def __enter__(self) -> _InstanceLock:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = os.read(fd, 32).decode(errors="replace").strip()
            os.close(fd)
            raise AlreadyRunning(int(pid) if pid.isdigit() else None) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self.fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing releases the flock
            self.fd = None


class Daemon:
    def __init__(self, config: Config, *, codex_home: Path | None = None,
                 env: dict[str, str] | None = None, runner: TaskRunner | None = None,
                 retry_policy: RetryPolicy | None = None, claim_wait_ms: int | None = None,
                 wall_clock: Callable[[], float] | None = None) -> None:
        self.config = config
        self.codex_home = codex_home
        self.env = env
        self.runner = runner  # injected in tests; otherwise built on the app-server in run()
        self.retry_policy = retry_policy
        self.claim_wait_ms = claim_wait_ms
        self.wall_clock = wall_clock
        self.app: Any = None
        self.source: BossSource | None = None
        self.discovery: dict[str, Any] | None = None
        self._stop = asyncio.Event()
        self._force = asyncio.Event()

    # --------------------------------------------------------------- control

    def request_stop(self) -> None:
        """First call: graceful stop. Second call: cancel running tasks at once."""
        if self._stop.is_set():
            logger.warning("second stop request: cancelling running tasks now")
            self._force.set()
        self._stop.set()

    def _install_signals(self) -> list[int]:
        loop = asyncio.get_running_loop()
        installed = []
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):
                loop.add_signal_handler(sig, self.request_stop)  # only in the main thread
                installed.append(sig)
        return installed

    # --------------------------------------------------------------- capabilities

    def capabilities(self) -> dict[str, Any]:
        """Never blocks: reads the discovery cache and the last known statuses."""
        status = dict(self.app.status) if self.app is not None else {"available": False}
        app_server: dict[str, Any] = {
            "available": bool(status.get("available")), "version": status.get("version"),
            "transport": status.get("transport", self.config.codex.app_server_transport),
            "fallbackFrom": status.get("fallbackFrom"),
            "metadata": (self.discovery or {}).get("metadata", self.discovery or {}),
        }
        caps: dict[str, Any] = {
            "codexAppServer": app_server,
            "codexExec": {"available": False, "version": None},
            "computerUse": {"codex": False, "cuaDriver": {"available": False, "version": None}},
        }
        extra = getattr(self.runner, "capabilities", None)
        if isinstance(extra, dict):
            caps.update({k: v for k, v in extra.items() if k in ("codexExec", "computerUse")})
        return caps

    async def _discovery_loop(self) -> None:
        from boss_agent.appserver.discovery import DiscoveryCache

        cache = DiscoveryCache(self.config.state_dir, self.config.codex.app_server_discovery_ttl_ms)
        self.discovery = cache.load()
        ttl_s = max(self.config.codex.app_server_discovery_ttl_ms / 1000, DISCOVERY_RETRY_S)
        while True:
            try:
                self.discovery = await cache.get(self.app)
            except Exception as exc:  # noqa: BLE001 - discovery is best effort, never fatal
                logger.warning("capability discovery failed: %s", exc.__class__.__name__)
            failed = bool(((self.discovery or {}).get("metadata") or {}).get("error"))
            await asyncio.sleep(DISCOVERY_RETRY_S if failed else ttl_s)

    # --------------------------------------------------------------- state file

    def state(self) -> dict[str, Any]:
        source = self.source.snapshot() if self.source else {}
        app = dict(self.app.status) if self.app is not None else None
        return {"pid": os.getpid(), "version": __version__, "updatedAt": _now(),
                "stopping": self._stop.is_set(), "appServer": app,
                "discoveredAt": (self.discovery or {}).get("discoveredAt"), **source}

    def write_state(self) -> None:
        try:
            write_atomic(self.config.state_dir / STATE_FILE,
                         json.dumps(self.state()).encode())
        except OSError as exc:
            logger.warning("cannot write the state file: %s", exc.strerror)

    async def _state_loop(self) -> None:
        while True:
            self.write_state()
            sd_notify("WATCHDOG=1")
            await asyncio.sleep(STATE_WRITE_S)

    # --------------------------------------------------------------- run

    async def run(self, ready: asyncio.Event | None = None) -> None:
        state_dir = ensure_state_dir(self.config.state_dir)
        identity = load_identity(state_dir)
        if identity is None:
            raise StateError("this device is not paired: run `boss-agent pair CODE --server URL`")
        with _InstanceLock(state_dir):
            signals = self._install_signals()
            try:
                async with contextlib.AsyncExitStack() as stack:
                    if self.runner is None:
                        await self._start_codex(stack)
                    await self._run_source(identity, ready)
            finally:
                loop = asyncio.get_running_loop()
                for sig in signals:
                    loop.remove_signal_handler(sig)
                self.write_state()

    async def _start_codex(self, stack: contextlib.AsyncExitStack) -> None:
        from boss_agent.appserver import AppServer
        from boss_agent.runner import Runner

        self.app = await stack.enter_async_context(
            AppServer.from_config(self.config, codex_home=self.codex_home))
        self.runner = Runner(self.config, self.app, codex_home=self.codex_home, env=self.env)

    async def _run_source(self, identity: Any, ready: asyncio.Event | None) -> None:
        assert self.runner is not None
        extra: dict[str, Any] = {}
        if self.claim_wait_ms is not None:
            extra["claim_wait_ms"] = self.claim_wait_ms
        self.source = source = BossSource(
            self.config.state_dir, identity, self.runner,
            max_concurrent=self.config.max_concurrent_tasks,
            approval_timeout_s=self.config.codex.approval_timeout_s,
            capabilities=self.capabilities, system=system_facts, policy=self.retry_policy,
            clock=self.wall_clock, **extra)
        async with asyncio.TaskGroup() as tg:
            background = []
            if self.app is not None:
                background.append(tg.create_task(self._discovery_loop(), name="discovery"))
            source.start(tg)
            background.append(tg.create_task(self._state_loop(), name="state file"))
            logger.info("boss-agent %s running as device %s", __version__, identity.device_id)
            if ready is not None:
                ready.set()
            sd_notify("READY=1")
            await self._stop.wait()
            sd_notify("STOPPING=1")
            await self._drain(source)
            await source.close()
            for task in background:
                task.cancel()

    async def _drain(self, source: BossSource) -> None:
        source.stop_claiming()
        self.write_state()
        grace = self.config.grace_period_s
        if source.runs.running:
            logger.info("waiting up to %ss for %d running task(s)", grace, len(source.runs.running))
        await self._wait_idle(source, grace)
        if source.runs.running:
            logger.info("interrupting %d running task(s)", len(source.runs.running))
            source.runs.cancel_all()
            await self._wait_idle(source, CANCEL_GRACE_S)
        if source.runs.running:
            source.runs.abort()  # the runner ignored the cancel: its runs spool `cancelled`
            await source.runs.wait_idle()
        await source.final_flush(FINAL_FLUSH_S)

    async def _wait_idle(self, source: BossSource, timeout_s: float) -> None:
        async with asyncio.TaskGroup() as tg:
            idle = tg.create_task(source.runs.wait_idle())
            forced = tg.create_task(self._force.wait())
            await asyncio.wait({idle, forced}, timeout=timeout_s,
                               return_when=asyncio.FIRST_COMPLETED)
            idle.cancel()
            forced.cancel()
