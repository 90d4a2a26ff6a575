"""``metrics.listen`` as an operator scrapes it: a real ``python -m boss_agent run`` on
real codex (scripted model), the real ControlPlane, ``/metrics`` parsed with
prometheus_client's own parser and ``/readyz`` through every phase: the pairing wait,
serving, a drain (SIGTERM while a task runs); in process, ``starting`` (a gateway
whose Redis is not up yet) and ``app_server_down`` (a codex that cannot start)."""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from boss_agent.controlplane import ControlPlane
from boss_agent.daemon.runtime import Daemon
from boss_agent.demo import scripted_model as sm
from boss_agent.sources.boss.pairing import pair_device
from boss_agent.sources.boss.retry import BossApiRetry
from tests.conftest import REPO
from tests.support.ports import free_port
from tests.support.redis_process import RedisProcess
from tests.support.cli import isolated, run_cli_async
from tests.support.config import make_config
from tests.support.daemon import StubRunner
from tests.support.waits import eventually

pytestmark = pytest.mark.codex

START_S = 90.0  # pairing noticed, codex started, on a loaded 2-core machine
TURN_S = 60.0  # one scripted turn, with slack
EXIT_S = 60.0  # the drain after SIGTERM, the app-server teardown
HTTP_TIMEOUT_S = 5.0  # one scrape on loopback
GRACE_S = 120  # longer than the test: the drain ends because the task ends, not the grace
# A label value an operator may see: a closed word (status, backend, source, reason, group).
WORD = re.compile(r"[A-Za-z_]{1,32}")


def families(text: str) -> dict[str, Any]:
    return {family.name: family for family in text_string_to_metric_families(text)}


def samples(fams: dict[str, Any], name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {tuple(sorted(s.labels.items())): s.value for fam in fams.values() for s in fam.samples
            if s.name == name}


def tasks_total(fams: dict[str, Any], status: str) -> float:
    return sum(v for labels, v in samples(fams, "boss_agent_tasks_total").items()
               if dict(labels)["status"] == status and dict(labels)["source"] == "boss")


class Probe:
    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"
        self.http = httpx.AsyncClient(timeout=HTTP_TIMEOUT_S)

    async def ready(self) -> tuple[int, str] | None:
        try:
            answer = await self.http.get(self.base + "/readyz")
        except httpx.TransportError:
            return None
        return answer.status_code, answer.json()["reason"]

    async def reason_is(self, reason: str) -> bool:
        found = await self.ready()
        return found is not None and found[1] == reason

    async def metrics(self) -> tuple[str, dict[str, Any]]:
        text = (await self.http.get(self.base + "/metrics")).text
        return text, families(text)


@contextlib.asynccontextmanager
async def probe(port: int) -> AsyncIterator[Probe]:
    found = Probe(port)
    try:
        yield found
    finally:
        await found.http.aclose()


def assert_no_ids_in_labels(text: str, *secrets: str) -> None:
    for fam in text_string_to_metric_families(text):
        for sample in fam.samples:
            for name, value in sample.labels.items():
                if name == "le":
                    continue
                assert WORD.fullmatch(value), f"{sample.name}{{{name}={value!r}}} looks like an id"
    for secret in secrets:
        assert secret not in text


async def test_metrics_count_real_tasks_and_readyz_follows_pairing_serving_and_drain(
        tmp_path: Path, codex_bin: str, codex_home: Path, workdir: Path,
        scripted_model: sm.ScriptedModel) -> None:
    port = free_port()
    async with ControlPlane(tmp_path / "cp" / "boss.db") as cp, probe(port) as scrape:
        env = isolated(tmp_path, BOSS_SERVER_URL=cp.url, BOSS_CODEX_BIN=codex_bin, CODEX_HOME=str(codex_home),
                       BOSS_WORKSPACES=str(tmp_path), BOSS_GRACE_PERIOD_S=str(GRACE_S),
                       BOSS_METRICS_LISTEN=f"127.0.0.1:{port}")
        log = (tmp_path / "daemon.log").open("ab")
        with log:
            proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "boss_agent", "run",
                                                        cwd=REPO, env=env, stdout=log, stderr=log)
        try:
            await eventually(lambda: scrape.reason_is("waiting_for_pairing"), START_S)
            assert await scrape.ready() == (503, "waiting_for_pairing")
            _, fams = await scrape.metrics()
            assert tasks_total(fams, "completed") == 0

            paired = await run_cli_async("pair", cp.create_pairing_code(), "--server", cp.url, env=env)
            assert paired.returncode == 0, paired.stderr
            await eventually(lambda: scrape.reason_is("serving"), START_S)
            assert await scrape.ready() == (200, "serving")

            prompts = ["first metrics task", "second metrics task"]
            for prompt in prompts:
                scripted_model.enqueue(sm.turn(sm.message(f"done: {prompt}")))
            ids = [cp.submit_task(p, workdir=str(workdir)) for p in prompts]
            for task_id in ids:
                await cp.wait_task(task_id, lambda v: v["status"] == "completed", TURN_S)
            scripted_model.enqueue(sm.hang(sm.message("never finishes")))
            cancelled = cp.submit_task("a task to cancel", workdir=str(workdir))
            await cp.wait_task(cancelled, lambda v: v["status"] == "running", TURN_S)
            cp.cancel_task(cancelled)
            await cp.wait_task(cancelled, lambda v: v["status"] == "cancelled", TURN_S)
            scripted_model.release()

            async def counted() -> dict[str, Any] | None:
                # The result is counted when the runner returns; delivered a moment later.
                _, found = await scrape.metrics()
                delivered = samples(found, "boss_agent_spool_pending") == {(): 0}
                return found if tasks_total(found, "cancelled") == 1 and delivered else None

            fams = await eventually(counted, TURN_S)
            text, _ = await scrape.metrics()
            assert tasks_total(fams, "completed") == 2 and tasks_total(fams, "failed") == 0
            by_backend = samples(fams, "boss_agent_tasks_total")
            assert by_backend[(("backend", "app_server"), ("source", "boss"), ("status", "completed"))] == 2
            durations = samples(fams, "boss_agent_task_duration_seconds_count")
            assert sum(durations.values()) == 3
            assert samples(fams, "boss_agent_tasks_running") == {(): 0}
            assert samples(fams, "boss_agent_app_server_up") == {(): 1}
            assert samples(fams, "boss_agent_app_server_restarts_total") == {(): 0}
            assert samples(fams, "boss_agent_spool_pending") == {(): 0}
            assert samples(fams, "boss_agent_heartbeat_last_success_timestamp_seconds")[()] > 0
            assert_no_ids_in_labels(text, *ids, cancelled, *prompts, str(tmp_path), str(workdir))

            # The drain: SIGTERM while a task runs; not ready at once, until the task ends.
            scripted_model.enqueue(sm.hang(sm.message("still running at SIGTERM")))
            last = cp.submit_task("running through the drain", workdir=str(workdir))
            await cp.wait_task(last, lambda v: v["status"] == "running", TURN_S)
            await eventually(lambda: _running(scrape), TURN_S)
            proc.send_signal(signal.SIGTERM)
            await eventually(lambda: scrape.reason_is("draining"), TURN_S)
            assert await scrape.ready() == (503, "draining")
            assert proc.returncode is None  # still draining: the task holds it
            scripted_model.release()
            assert await asyncio.wait_for(proc.wait(), EXIT_S) == 0
            assert cp.task(last)["status"] == "completed"
            assert await scrape.ready() is None  # gone with the daemon
        finally:
            scripted_model.release()
            if proc.returncode is None:
                proc.kill()
                await proc.wait()


async def _running(scrape: Probe) -> bool:
    _, fams = await scrape.metrics()
    return samples(fams, "boss_agent_tasks_running") == {(): 1}


async def test_readyz_says_starting_until_the_gateway_is_up(tmp_path: Path, redis_server_bin: str) -> None:
    """A gateway whose Redis is not up yet holds the daemon in ``starting`` (it waits for
    the source, bounded); once Redis answers, the daemon serves and the by-framework
    stream facts appear."""
    redis = RedisProcess(redis_server_bin, tmp_path)
    port = free_port()
    config = make_config(tmp_path, **{"gateway.enabled": True, "gateway.redis_url": redis.url,
                                      "metrics.listen": f"127.0.0.1:{port}"})
    daemon = Daemon(config, runner=StubRunner(), handle_signals=False)  # type: ignore[arg-type]
    async with probe(port) as scrape, asyncio.TaskGroup() as tg:
        job = tg.create_task(daemon.run())
        try:
            await eventually(lambda: scrape.reason_is("starting"), START_S)
            assert await scrape.ready() == (503, "starting")
            redis.start()
            await eventually(lambda: scrape.reason_is("serving"), START_S)

            async def bf_facts() -> dict[str, Any] | None:
                _, found = await scrape.metrics()
                return found if samples(found, "by_framework_workers_online") == {(): 1} else None

            fams = await eventually(bf_facts, START_S)
            pending = samples(fams, "by_framework_stream_pending_messages")
            assert pending == {(("group", "agent_engines"), ("name", "boss_local_agent"),
                                ("queue_type", "agent_type")): 0}
            assert "boss_agent_app_server_up" not in fams  # an injected runner: no app-server
        finally:
            daemon.request_stop()
            await asyncio.wait_for(job, EXIT_S)
            redis.stop()


async def test_readyz_says_app_server_down_when_codex_cannot_start(tmp_path: Path) -> None:
    port = free_port()
    async with ControlPlane(tmp_path / "cp" / "boss.db") as cp, probe(port) as scrape:
        config = make_config(tmp_path, server_url=cp.url, **{"codex.bin": str(tmp_path / "no-codex"),
                                                             "metrics.listen": f"127.0.0.1:{port}"})
        policy = BossApiRetry.fast()
        await pair_device(config.state_dir, cp.url, cp.create_pairing_code(), policy=policy)
        daemon = Daemon(config, retry_policy=policy, claim_wait_ms=300, handle_signals=False)
        async with asyncio.TaskGroup() as tg:
            job = tg.create_task(daemon.run())
            try:
                await eventually(lambda: scrape.reason_is("app_server_down"), START_S)
                assert await scrape.ready() == (503, "app_server_down")
                _, fams = await scrape.metrics()
                assert samples(fams, "boss_agent_app_server_up") == {(): 0}
            finally:
                daemon.request_stop()
                await asyncio.wait_for(job, EXIT_S)
