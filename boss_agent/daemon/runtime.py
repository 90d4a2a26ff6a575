"""The Daemon: owns the one task group every long-lived piece of boss-agent runs in.

``Daemon.run`` takes the state dir's single-instance lock, waits for pairing when
the device has no usable identity (``pairing_wait``), starts the codex
app-server (unless a runner was injected), the capability refresh loop, its task
sources — the Boss source (journal recovery, heartbeat, claim, spool flusher, task
runs) and, when configured, the Redis gateway — each under a ``SourceSupervisor``
(a failing source is restarted, never the daemon), the state file writer and the
systemd watchdog; then it signals readiness (``ready`` and ``READY=1``) and waits
for a stop request. Both sources put their runs in one ``RunRegistry`` whose
``Slots`` hold ``max_concurrent_tasks``: the device never runs more than that.

Shutdown follows uvicorn (``process.ShutdownController``) and is one loop over
the sources and one registry: SIGTERM/SIGINT stops every source taking work (the
Boss source also cancels at once the tasks that only wait on an approval);
running tasks get ``grace_period_s`` to finish; then ``force_cancel`` sets every
run's cancel event, Boss or gateway alike (the runner interrupts the turn on the
app-server, ends its commands and reports ``cancelled``); the registry cancels a
runner that ignores it outright after its grace (``RunRegistry.cancel_grace_s``), and
the run is reported ``cancelled``. Then each source closes: the
Boss spool gets one bounded delivery attempt; the rest waits for the next start.

Heartbeats never wait for discovery: the refresh loop writes ``self.discovery`` and
``self.runner_caps``, and the heartbeat only reads them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from boss_agent import __version__
from boss_agent.aio import race
from boss_agent.codexbin import codex_version, find_codex
from boss_agent.codexversion import require_supported
from boss_agent.config import Config, load_config
from boss_agent.netaddr import check_redis_url, check_server_url
from boss_agent.errors import AppServerUnavailable, ConfigError, StateError
from boss_agent.identity import Identity, ensure_state_dir, load_identity, local_device_id
from boss_agent.lifecycles import DAEMON, DaemonPhase
from boss_agent.daemon.process import (
    READY,
    STOPPING,
    InstanceLock,
    ShutdownController,
    Watchdog,
    sd_notify,
)
from boss_agent.daemon.pairing_wait import wait_for_identity
from boss_agent.daemon.reload import log_reload, plan_reload
from boss_agent.sources.slots import Slots
from boss_agent.daemon.supervise import SourceSupervisor
from boss_agent.sources.boss import BossSource, BossApiRetry
from boss_agent.daemon.statefile import StateWriter
from boss_agent.daemon.sysinfo import system_facts
from boss_agent.sources.contract import TaskSource
from boss_agent.sources.inflight import RunRegistry
from boss_agent.tasks import TaskRunner
from boss_agent.timefmt import utc_now

if TYPE_CHECKING:  # imported at run time only when used: a Boss-only daemon loads no Redis
    from boss_agent.appserver.client import AppServer
    from boss_agent.sources.gateway import Gateway

logger = logging.getLogger(__name__)

STATE_WRITE_S = 5.0  # `boss-agent status` is at most this stale (written only on a change)
DISCOVERY_RETRY_S = 60.0  # after a failed discovery; the cache TTL paces successful ones
SCRATCH_SWEEP_S = 24 * 3600.0  # how often empty, long-unused scratch dirs are removed
SCRATCH_BUSY_RETRY_S = 3600.0  # the sweep waits for a moment with no task running
# After the registry forced the runners that ignored the cancel (RunRegistry.cancel_grace_s),
# how long their sources may take to report them before their asyncio tasks are cancelled.
DRAIN_REPORT_S = 5.0
SOURCE_READY_TIMEOUT_S = 15.0  # the gateway's lease + group set-up on a reachable Redis
SHUTDOWN_REASON = "worker_shutdown"  # the cancel reason a run stopped by shutdown reports
_NO_CAPS: dict[str, Any] = {
    "codexExec": {"available": False, "version": None},
    "computerUse": {"codex": False, "cuaDriver": {"available": False, "version": None}},
}


def check_codex_release(config: Config) -> None:
    """Refuse a codex below the supported range before anything starts (``codexversion``).

    Only the codex this daemon starts: an app-server at a URL is checked by its
    ``initialize`` answer. A codex that is missing or will not say its version is left
    to the app-server's own start, which reports it in ``status``.
    """
    if config.codex.app_server_url:
        return
    try:
        version = codex_version(find_codex(config.codex.bin))
    except AppServerUnavailable:
        return
    require_supported(version)


def gateway_worker_id(device_id: str) -> str:
    """The default gateway worker id: the device id in the gateway's id alphabet."""
    return "boss-agent-" + re.sub(r"[^A-Za-z0-9_.-]", "-", device_id)[:100]


class Daemon:
    def __init__(self, config: Config, *, codex_home: Path | None = None,
                 env: dict[str, str] | None = None, runner: TaskRunner | None = None,
                 retry_policy: BossApiRetry | None = None, claim_wait_ms: int | None = None,
                 wall_clock: Callable[[], float] | None = None, handle_signals: bool = True,
                 instance_lock: InstanceLock | None = None) -> None:
        self.config = config
        # `up` takes the state dir's lock before it pairs; the daemon then runs under it.
        self.instance_lock = instance_lock
        self.codex_home = codex_home
        self.env = env
        self.runner = runner  # injected in tests; otherwise built on the app-server in run()
        self.retry_policy = retry_policy
        self.claim_wait_ms = claim_wait_ms
        self.wall_clock = wall_clock
        self.shutdown = ShutdownController(config.grace_period_s, handle_signals=handle_signals)
        self.app: AppServer | None = None
        self.source: BossSource | None = None
        self.gateway: Gateway | None = None
        self.device_id: str | None = None  # from the pairing, or the local id of a gateway-only device
        self.reloads = 0  # SIGHUPs handled
        self.reloaded = asyncio.Event()  # set after each handled SIGHUP
        self.slots: Slots | None = None  # one budget for both sources, made in the loop
        self.runs: RunRegistry | None = None  # every run of every source, made in the loop
        self.supervisors: list[SourceSupervisor[Any]] = []
        self.discovery: dict[str, Any] | None = None
        self.runner_caps: dict[str, Any] = dict(_NO_CAPS)
        self.started_at = utc_now()
        self.state_file = StateWriter(config.state_dir)
        self.phase = DaemonPhase.STARTING

    def _enter(self, phase: DaemonPhase) -> None:
        self.phase = DAEMON.check(self.phase, phase)

    def request_stop(self) -> None:
        """First call: graceful stop. Second call: interrupt running tasks at once."""
        if self.shutdown.stopping.is_set():
            self.shutdown.force("second stop request")
        else:
            self.shutdown.request_stop("stop requested")

    # --------------------------------------------------------------- capabilities

    def capabilities(self) -> dict[str, Any]:
        """The heartbeat's ``capabilities``; never blocks (reads cached facts only)."""
        status = dict(self.app.status) if self.app is not None else {}
        discovery = self.discovery or {}
        metadata = dict(discovery.get("metadata") or {})
        if discovery.get("discoveredAt") and "discoveredAt" not in metadata:
            metadata["discoveredAt"] = discovery["discoveredAt"]
        app_server = {
            "available": bool(status.get("available")), "version": status.get("version"),
            "transport": status.get("transport", self.config.codex.app_server_transport),
            "fallbackFrom": status.get("fallbackFrom"), "metadata": metadata,
        }
        return {"codexAppServer": app_server, **self.runner_caps}

    async def _refresh_runner_caps(self) -> None:
        refresh = getattr(self.runner, "refresh_capabilities", None)
        try:
            caps = await refresh() if refresh else getattr(self.runner, "capabilities", None)
        except Exception as exc:  # noqa: BLE001 - a probe failure is reported, never fatal
            logger.warning("capability probe failed: %s", exc.__class__.__name__)
            return
        if isinstance(caps, dict):
            self.runner_caps = {k: caps[k] for k in ("codexExec", "computerUse") if k in caps}

    async def _discovery_loop(self, app: AppServer) -> None:
        from boss_agent.appserver.discovery import DiscoveryCache

        cache = DiscoveryCache(self.config.state_dir, self.config.codex.app_server_discovery_ttl_ms)
        self.discovery = cache.load()
        ttl_s = max(self.config.codex.app_server_discovery_ttl_ms / 1000, DISCOVERY_RETRY_S)
        while True:
            await self._refresh_runner_caps()  # quick probes first: exec and computer use
            try:
                self.discovery = await cache.get(app)
            except Exception as exc:  # noqa: BLE001 - discovery is best effort, never fatal
                logger.warning("capability discovery failed: %s", exc.__class__.__name__)
            if self.source is not None:
                self.source.heartbeat.now.set()  # new capabilities: tell the server now
            failed = bool(((self.discovery or {}).get("metadata") or {}).get("error"))
            await asyncio.sleep(DISCOVERY_RETRY_S if failed else ttl_s)

    # --------------------------------------------------------------- state file

    def state(self) -> dict[str, Any]:
        """The allow-listed keys of ``statefile.STATE_KEYS``; never the token."""
        app = dict(self.app.status) if self.app is not None else {}
        state: dict[str, Any] = {
            "started_at": self.started_at, "state": self.phase,
            "codex_version": app.get("version"),
            "codex_transport": app.get("transport", self.config.codex.app_server_transport),
            "discovered_at": (self.discovery or {}).get("discoveredAt"),
        }
        for supervisor in self.supervisors:  # each source's own keys (TaskSource.status)
            if supervisor.current is not None:
                state.update(supervisor.current.status())
        if self.gateway is not None:
            state.setdefault("device_id", self.device_id)  # a gateway-only device's local id
        return state

    def write_state(self, *, force: bool = True) -> None:
        try:
            self.state_file.write(self.state(), force=force)
        except StateError as exc:
            logger.warning("%s", exc)

    async def _scratch_loop(self) -> None:
        """At start and once a day, while no task runs (none can be using a dir then)."""
        from boss_agent.runner.policy import sweep_scratch

        while True:
            if self.runs is not None and len(self.runs):
                await asyncio.sleep(SCRATCH_BUSY_RETRY_S)
                continue
            try:
                removed = await asyncio.to_thread(sweep_scratch, self.config)
            except Exception as exc:  # noqa: BLE001 - housekeeping never stops the daemon
                logger.warning("scratch sweep failed: %s", exc.__class__.__name__)
            else:
                if removed:
                    logger.info("removed %d empty scratch dir(s) unused for a week", removed)
            await asyncio.sleep(SCRATCH_SWEEP_S)

    async def _state_loop(self) -> None:
        while True:
            self.write_state(force=False)
            await asyncio.sleep(STATE_WRITE_S)

    # --------------------------------------------------------------- run

    async def run(self, ready: asyncio.Event | None = None) -> None:
        if self.runner is None:
            await asyncio.to_thread(check_codex_release, self.config)
        state_dir = ensure_state_dir(self.config.state_dir)
        gateway_only = self.config.gateway.enabled and not self.config.server_url
        if self.config.gateway.enabled:  # refused at load unless allowed: then it warns here
            check_redis_url(self.config.gateway.redis_url, self.config.gateway.allow_insecure_redis)
        with self.instance_lock or InstanceLock(state_dir), self.shutdown:
            try:
                await self._run_locked(state_dir, gateway_only, ready)
            finally:
                self._enter(DaemonPhase.STOPPED)
                self.write_state()

    async def _run_locked(self, state_dir: Path, gateway_only: bool, ready: asyncio.Event | None) -> None:
        async with contextlib.AsyncExitStack() as stack:
            if self.config.metrics_listen is not None:  # only then: prometheus_client costs memory
                from boss_agent.daemon.metrics import serve_metrics

                await stack.enter_async_context(serve_metrics(self, *self.config.metrics_listen))
            if gateway_only:  # a Redis-only device needs no pairing
                identity = load_identity(state_dir)
            else:
                identity = await wait_for_identity(state_dir, self.shutdown.stopping,
                                                   self._waiting_for_pairing)
                if identity is None:
                    return  # stopped before anyone paired this device
            if identity is not None:
                check_server_url(identity.server_url, self.config.allow_insecure_http)
            if self.runner is None:
                await self._start_codex(stack)
            await self._serve(identity, ready)

    def _waiting_for_pairing(self) -> None:
        self._enter(DaemonPhase.WAITING_FOR_PAIRING)
        self.write_state()

    async def _start_codex(self, stack: contextlib.AsyncExitStack) -> None:
        from boss_agent.appserver.client import AppServer
        from boss_agent.runner import Runner

        self.app = await stack.enter_async_context(
            AppServer.from_config(self.config, codex_home=self.codex_home))
        self.runner = Runner(self.config, self.app, codex_home=self.codex_home, env=self.env)
        stack.push_async_callback(self.runner.aclose)  # before the app-server closes

    def _new_source(self, identity: Identity) -> BossSource:
        assert self.runner is not None
        extra: dict[str, Any] = {}
        if self.claim_wait_ms is not None:
            extra["claim_wait_ms"] = self.claim_wait_ms
        return BossSource(
            self.config.state_dir, identity, self.runner,
            max_concurrent=self.config.max_concurrent_tasks,
            approval_timeout_s=self.config.codex.approval_timeout_s,
            capabilities=self.capabilities, system=system_facts, policy=self.retry_policy,
            clock=self.wall_clock, registry=self.runs, **extra)

    def _new_gateway(self, device_id: str) -> Gateway:
        from boss_agent.sources.gateway import Gateway

        assert self.runner is not None
        worker_id = self.config.gateway.worker_id or gateway_worker_id(device_id)
        return Gateway(self.config, self.runner, worker_id=worker_id,
                       max_concurrent=self.config.max_concurrent_tasks, runs=self.runs,
                       state_dir=self.config.state_dir)

    def _supervisors(self, identity: Identity | None,
                     device_id: str) -> list[SourceSupervisor[Any]]:
        """The Boss source when paired, the gateway when enabled."""
        # on_start keeps the live instance at hand, for status, heartbeats and reload.
        def boss_started(source: BossSource) -> None:
            self.source = source

        def gateway_started(source: Gateway) -> None:
            self.gateway = source

        sources: list[SourceSupervisor[Any]] = []
        if identity is not None:
            sources.append(SourceSupervisor("boss", lambda: self._new_source(identity),
                                            boss_started))
        if self.config.gateway.enabled:
            sources.append(SourceSupervisor("gateway", lambda: self._new_gateway(device_id),
                                            gateway_started))
        return sources

    @staticmethod
    async def _source_ready(name: str, up: asyncio.Event) -> None:
        # READY=1 means "serving"; a Redis that is down must not hold the Boss source back.
        try:
            async with asyncio.timeout(SOURCE_READY_TIMEOUT_S):
                await up.wait()
        except TimeoutError:
            logger.warning("the %s source is not up yet; it keeps trying in the background", name)

    async def _serve(self, identity: Identity | None, ready: asyncio.Event | None) -> None:
        """Serve the Boss source (when paired) and the gateway (when enabled) until stopped."""
        self.runs = RunRegistry(Slots(self.config.max_concurrent_tasks),
                                thread_wait_s=self.config.codex.approval_timeout_s)
        self.slots = self.runs.slots
        device_id = identity.device_id if identity else local_device_id(self.config.state_dir)
        self.device_id = device_id
        self.supervisors = self._supervisors(identity, device_id)
        async with asyncio.TaskGroup() as tg:
            if self.app is not None:
                background = [tg.create_task(self._discovery_loop(self.app), name="discovery")]
            else:
                await self._refresh_runner_caps()
                background = []
            # The gateway first: its lease is taken before the Boss source claims work.
            for supervisor in reversed(self.supervisors):
                up = asyncio.Event()
                background.append(tg.create_task(supervisor.run(up), name=f"{supervisor.name} source"))
                await self._source_ready(supervisor.name, up)
            background.append(tg.create_task(self._state_loop(), name="state file"))
            background.append(tg.create_task(self._scratch_loop(), name="scratch sweep"))
            background.append(tg.create_task(self._reload_loop(), name="config reload"))
            background.append(tg.create_task(
                Watchdog.from_env().run(lambda: True, self.shutdown.stopping), name="watchdog"))
            self._enter(DaemonPhase.RUNNING)
            self.write_state()
            logger.info("boss-agent %s running as device %s%s", __version__, device_id,
                        "" if identity else " (gateway only)")
            if ready is not None:
                ready.set()
            sd_notify(READY)
            await self.shutdown.stopping.wait()
            sd_notify(STOPPING)
            self._enter(DaemonPhase.STOPPING)
            await self._drain([s.current for s in self.supervisors if s.current is not None])
            for task in background:
                task.cancel()

    async def _reload_loop(self) -> None:
        while True:
            await self.shutdown.reload.wait()
            self.shutdown.reload.clear()
            self.reload_config()

    def reload_config(self) -> None:
        """SIGHUP: re-read the config file; apply the live keys to the next tasks."""
        try:
            loaded = load_config(self.config.config_path)
        except ConfigError as exc:
            logger.warning("reload failed, keeping the running configuration: %s", exc)
            self.reloaded.set()
            return
        result = plan_reload(self.config, loaded)
        self.config = result.config
        if self.runner is not None and hasattr(self.runner, "config"):
            self.runner.config = result.config  # read per task: running tasks keep theirs
        if self.source is not None:
            self.source.approvals.timeout_s = result.config.codex.approval_timeout_s
        if self.runs is not None:  # how long a task waits for its thread's running turn
            self.runs.thread_wait_s = result.config.codex.approval_timeout_s
        if self.gateway is not None and "projects" in result.applied:
            self.gateway.apply_projects(result.config.projects)  # ids only: what peers route by
        logging.getLogger("boss_agent").setLevel(result.config.log_level.upper())
        log_reload(result)
        self.reloads += 1
        self.reloaded.set()

    async def _drain(self, sources: list[TaskSource]) -> None:
        """One loop for every source: stop taking work, then end every run in the registry."""
        runs = self.runs
        assert runs is not None
        for source in sources:
            source.stop_accepting()
        self.write_state()
        await race(runs.wait_idle(), self.shutdown.force_cancel.wait())
        if len(runs):
            # Each runner interrupts its turn (`cancelled`); the registry forces one that
            # ignores the cancel after its grace (`cancel_forced`), Boss and gateway alike.
            runs.cancel_all(SHUTDOWN_REASON)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(runs.cancel_grace_s + DRAIN_REPORT_S):
                    await runs.wait_idle()
        if len(runs):
            runs.abort()  # a source still reporting: it reports `cancelled` on its way out
            await runs.wait_idle()
        for source in sources:
            await source.close()

