"""``metrics.listen``: Prometheus ``/metrics`` and the ``/readyz`` probe, on loopback.

Imported only when ``metrics.listen`` is set (``prometheus_client`` costs memory a
quiet device should not pay). ``DaemonMetrics`` is the daemon's ``metrics.Recorder``:
events (a task started or ended, an approval waited, a heartbeat or a poison entry)
move counters and histograms as they happen; states (runs in flight, the spool, the
app-server) are read from the daemon at scrape time, so they cannot drift. The
gateway's Redis facts (pending entries, the oldest one's age, peers online) are asked
of Redis only when someone scrapes, within ``REDIS_SCRAPE_TIMEOUT_S``.

The names of by-framework's catalog are used where a gateway task means the same as
one of its executions: ``by_framework_executions_*``, ``by_framework_execution_run_
duration_seconds``, ``by_framework_stream_pending_messages``, ``by_framework_stream_
oldest_pending_age_seconds``, ``by_framework_workers_online``. Labels come from closed
sets only (docs/metrics.md lists them).

``/readyz`` answers 200 only while the daemon serves, 503 otherwise; the body is
``{"ready": …, "reason": …}`` with reason ``starting``, ``waiting_for_pairing``,
``draining``, ``app_server_down`` or ``serving`` (by-framework's probe: the status code
is the one bit a probe acts on, the reason is for people). It is a readiness probe,
never a liveness one: a Redis or codex outage must not get every device restarted.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from collections.abc import AsyncIterator, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import Collector

from boss_agent import metrics
from boss_agent.errors import ConfigError
from boss_agent.lifecycles import DaemonPhase
from boss_agent.sources.gateway import keys

if TYPE_CHECKING:
    from boss_agent.appserver.client import AppServer
    from boss_agent.config import Config
    from boss_agent.daemon.process import ShutdownController
    from boss_agent.sources.boss import BossSource
    from boss_agent.sources.gateway import Gateway
    from boss_agent.sources.inflight import RunRegistry

logger = logging.getLogger(__name__)

REDIS_SCRAPE_TIMEOUT_S = 2.0  # a scrape must answer even when Redis hangs (Prometheus times out at 10 s)
SHUTDOWN_TIMEOUT_S = 1.0  # a scrape in flight when the daemon stops is abandoned after this
TASK_BUCKETS_S = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200)  # a reply to a long refactor
APPROVAL_BUCKETS_S = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600)  # up to codex.approval_timeout_s
ERROR_CODE = re.compile(r"[a-z][a-z0-9_]{0,47}")  # the runner's codes; anything else is "other"
SOURCES = ("boss", "gateway")
STATUSES = ("completed", "failed", "cancelled")
BACKENDS = ("app_server", "exec", "cua")
READY = "serving"


class Daemon(Protocol):
    """What the metrics read from the daemon (``daemon.runtime.Daemon``), named here so
    that this module, which the daemon imports, does not import the daemon back."""

    config: Config
    phase: DaemonPhase
    shutdown: ShutdownController
    app: AppServer | None
    runs: RunRegistry | None
    source: BossSource | None
    gateway: Gateway | None


def _closed(value: str | None, allowed: tuple[str, ...], other: str = "other") -> str:
    return value if value is not None and value in allowed else other


def readiness(daemon: Daemon) -> str:
    """Why the daemon is or is not ready (by-framework's ``reason``): first match wins."""
    phase = daemon.phase
    if phase in (DaemonPhase.STOPPING, DaemonPhase.STOPPED) or daemon.shutdown.stopping.is_set():
        return "draining"
    if phase == DaemonPhase.WAITING_FOR_PAIRING:
        return "waiting_for_pairing"
    if phase != DaemonPhase.RUNNING:
        return "starting"
    if daemon.app is not None and not daemon.app.status.get("available"):
        return "app_server_down"
    return READY


class _States(Collector):
    """What is read from the daemon at each scrape."""

    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        self.redis_facts: list[Metric] = []  # filled by the handler, just before generating

    def collect(self) -> Iterable[Metric]:
        daemon = self.daemon
        running = GaugeMetricFamily("boss_agent_tasks_running",
                                    "Tasks in flight, both sources (waiting on an approval included)")
        running.add_metric([], len(daemon.runs) if daemon.runs is not None else 0)
        yield running
        spool = GaugeMetricFamily("boss_agent_spool_pending",
                                  "Task results written to disk and not yet delivered to the Boss server")
        spool.add_metric([], len(daemon.source.spool) if daemon.source is not None else 0)
        yield spool
        ready = GaugeMetricFamily("boss_agent_ready", "1 while /readyz answers 200", labels=["reason"])
        ready.add_metric([readiness(daemon)], 1.0 if readiness(daemon) == READY else 0.0)
        yield ready
        if daemon.app is not None:
            up = GaugeMetricFamily("boss_agent_app_server_up", "1 while the codex app-server is connected")
            up.add_metric([], 1.0 if daemon.app.status.get("available") else 0.0)
            yield up
            restarts = CounterMetricFamily("boss_agent_app_server_restarts",
                                           "codex app-server connections that ended and were restarted")
            restarts.add_metric([], daemon.app.restarts)
            yield restarts
        yield from self.redis_facts


class DaemonMetrics:
    """The daemon's recorder and its registry (one per daemon: tests run several)."""

    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        disable_created_metrics()  # type: ignore[no-untyped-call]  # no ``_created`` series: they double the scrape for no alert
        self.registry = CollectorRegistry()
        reg = self.registry
        self.tasks = Counter("boss_agent_tasks", "Tasks that ended, by source, status and backend",
                             ["source", "status", "backend"], registry=reg)
        self.duration = Histogram("boss_agent_task_duration_seconds",
                                  "Wall time from the runner's start to the task's result",
                                  ["source", "status"], buckets=TASK_BUCKETS_S, registry=reg)
        self.approvals = Gauge("boss_agent_approvals_pending", "Approvals waiting for a person",
                               registry=reg)
        self.approval_wait = Histogram("boss_agent_approval_wait_seconds",
                                       "How long a person took to answer (or the wait to time out)",
                                       buckets=APPROVAL_BUCKETS_S, registry=reg)
        self.heartbeat = Gauge("boss_agent_heartbeat_last_success_timestamp_seconds",
                               "Unix time of the last heartbeat the Boss server accepted", registry=reg)
        self.poison = Counter("boss_agent_gateway_poison", "Gateway entries that were not a usable "
                              "command, acked as failed", registry=reg)
        self.bf_started = Counter("by_framework_executions_started", "Gateway executions started",
                                  ["agent_type"], registry=reg)
        self.bf_completed = Counter("by_framework_executions_completed",
                                    "Gateway executions that reached a terminal status",
                                    ["status", "agent_type"], registry=reg)
        self.bf_failed = Counter("by_framework_executions_failed", "Gateway executions that failed",
                                 ["agent_type", "error_type"], registry=reg)
        self.bf_run = Histogram("by_framework_execution_run_duration_seconds",
                                "Worker processing time of gateway executions", ["status", "agent_type"],
                                buckets=TASK_BUCKETS_S, registry=reg)
        for source in SOURCES:  # every series exists from the start: rate() needs a zero
            for status in STATUSES:
                for backend in BACKENDS:
                    self.tasks.labels(source, status, backend)
        self.states = _States(daemon)
        reg.register(self.states)

    def _agent_types(self) -> tuple[str, ...]:
        return tuple(self.daemon.config.gateway.agent_types)

    # --- metrics.Recorder -------------------------------------------------------------
    def task_started(self, source: str, agent_type: str | None) -> None:
        if agent_type is not None:
            self.bf_started.labels(_closed(agent_type, self._agent_types())).inc()

    def task_finished(self, source: str, agent_type: str | None, status: str, backend: str | None,
                      error_code: str | None, seconds: float) -> None:
        status = _closed(status, STATUSES)
        source = _closed(source, SOURCES)
        self.tasks.labels(source, status, _closed(backend, BACKENDS, "none")).inc()
        self.duration.labels(source, status).observe(seconds)
        if agent_type is None:
            return
        agent_type = _closed(agent_type, self._agent_types())
        self.bf_completed.labels(status.upper(), agent_type).inc()
        self.bf_run.labels(status.upper(), agent_type).observe(seconds)
        if status == "failed":
            code = error_code if error_code and ERROR_CODE.fullmatch(error_code) else "other"
            self.bf_failed.labels(agent_type, code).inc()

    def approval_started(self) -> None:
        self.approvals.inc()

    def approval_ended(self, seconds: float) -> None:
        self.approvals.dec()
        self.approval_wait.observe(seconds)

    def heartbeat_succeeded(self, at: float) -> None:
        self.heartbeat.set(at)

    def gateway_poison(self) -> None:
        self.poison.inc()

    # --- the scrape -------------------------------------------------------------------
    async def scrape(self) -> bytes:
        self.states.redis_facts = await self._redis_facts()
        return generate_latest(self.registry)

    async def _redis_facts(self) -> list[Metric]:
        gateway = self.daemon.gateway
        if gateway is None or not gateway.info.get("connected"):
            return []
        try:
            async with asyncio.timeout(REDIS_SCRAPE_TIMEOUT_S):
                return await stream_facts(gateway.redis, gateway.agent_types, gateway.group)
        except Exception as exc:  # noqa: BLE001 - Redis down: the scrape still answers, without these
            logger.info("metrics: Redis facts unavailable (%s)", type(exc).__name__)
            return []


async def stream_facts(redis: Any, agent_types: Iterable[str], group: str) -> list[Metric]:
    """The group's pending entries and its oldest one's idle age per agent-type stream, and
    the workers online for these agent types. One key per command: cluster-safe."""
    labels = ["queue_type", "name", "group"]
    pending = GaugeMetricFamily("by_framework_stream_pending_messages",
                                "Entries read by a consumer of the group and not yet acked", labels=labels)
    oldest = GaugeMetricFamily("by_framework_stream_oldest_pending_age_seconds",
                               "Idle time of the group's oldest pending entry", labels=labels)
    members: set[str] = set()
    for agent_type in agent_types:
        stream = keys.agent_type_stream(agent_type)
        summary = await redis.xpending(stream, group)
        first = await redis.xpending_range(stream, group, min="-", max="+", count=1)
        pending.add_metric(["agent_type", agent_type, group], int(summary.get("pending") or 0))
        age = first[0]["time_since_delivered"] / 1000 if first else 0.0
        oldest.add_metric(["agent_type", agent_type, group], age)
        members.update(map(keys.text, await redis.smembers(keys.agent_type_members(agent_type))))
    online = 0
    for worker in sorted(members):
        online += int(await redis.exists(keys.worker_lease(worker)))
    workers = GaugeMetricFamily("by_framework_workers_online",
                                "Workers whose lease is live, among those serving this device's agent types")
    workers.add_metric([], online)
    return [pending, oldest, workers]


@contextlib.asynccontextmanager
async def serve_metrics(daemon: Daemon, host: str, port: int) -> AsyncIterator[DaemonMetrics]:
    """``/metrics`` and ``/readyz`` on ``host:port`` for the block; the daemon's recorder."""
    recorder = DaemonMetrics(daemon)

    async def scrape(_: web.Request) -> web.Response:
        body = await recorder.scrape()
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def ready(_: web.Request) -> web.Response:
        reason = readiness(daemon)
        return web.Response(text=json.dumps({"ready": reason == READY, "reason": reason}),
                            status=200 if reason == READY else 503, content_type="application/json")

    app = web.Application()
    app.router.add_get("/metrics", scrape)
    app.router.add_get("/readyz", ready)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=SHUTDOWN_TIMEOUT_S)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except OSError as exc:
        await runner.cleanup()
        raise ConfigError(f"metrics.listen {host}:{port}: cannot listen ({exc.strerror or exc})") from exc
    metrics.install(recorder)
    logger.info("metrics on http://%s:%d/metrics, readiness on /readyz", _bracketed(host), port)
    try:
        yield recorder
    finally:
        metrics.install(None)
        await runner.cleanup()


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host
