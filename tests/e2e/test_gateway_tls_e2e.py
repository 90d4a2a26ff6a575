"""The gateway over TLS as an ACL user, end to end: a real redis-server that speaks only
TLS (trustme certificates, plain port closed) and knows one ACL user, the whole
``Daemon`` (gateway-only) on the real codex app-server with the scripted model, and
by-framework 0.2.1's GatewayClient as the client over the same ``rediss://`` URL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis.asyncio as aioredis
import redis.exceptions as redis_errors
from prometheus_client.parser import text_string_to_metric_families

from boss_agent.cli.doctor import check_redis
from boss_agent.daemon.runtime import Daemon
from boss_agent.demo import scripted_model as sm
from tests.support.ports import free_port
from tests.support.config import make_config
from tests.support.daemon import serving
from tests.support.gateway import AGENT, ask, delta_text, read_events, record_of, sdk_client
from tests.support.redis_process import running
from tests.support.redis_tls import PASSWORD, TlsRedis
from tests.support.waits import eventually

pytestmark = [pytest.mark.codex, pytest.mark.redis]

TURN_WAIT_S = 60.0  # a real codex turn on a loaded 2-core machine, with slack
HTTP_TIMEOUT_S = 5.0


@pytest.fixture
def tls_redis(tmp_path: Path, redis_server_bin: str) -> Iterator[TlsRedis]:
    with running(TlsRedis(redis_server_bin, tmp_path)) as server:
        yield server


def sdk_redis(server: TlsRedis) -> aioredis.Redis:
    return aioredis.Redis.from_url(server.url, decode_responses=True, ssl_ca_certs=str(server.ca_file))


def completed_gateway_tasks(text: str) -> float:
    return sum(sample.value for family in text_string_to_metric_families(text) for sample in family.samples
               if sample.name == "by_framework_executions_completed_total"
               and sample.labels == {"status": "COMPLETED", "agent_type": AGENT})


async def test_a_daemon_serves_the_sdk_over_tls_as_an_acl_user(
        tmp_path: Path, tls_redis: TlsRedis, codex_bin: str, codex_home: Path,
        scripted_model: sm.ScriptedModel, caplog: pytest.LogCaptureFixture) -> None:
    port = free_port()
    config = make_config(tmp_path, codex_bin, **{
        "gateway.enabled": True, "gateway.redis_url": tls_redis.url,
        "gateway.redis_ca_file": str(tls_redis.ca_file), "gateway.agent_types": [AGENT],
        "gateway.worker_id": "w-tls", "metrics.listen": f"127.0.0.1:{port}"})
    assert config.server_url is None  # gateway-only: no pairing, Redis is the only source
    answer = "Reached over TLS as an ACL user."
    scripted_model.enqueue(sm.turn(sm.message(answer)))
    redis = sdk_redis(tls_redis)
    daemon = Daemon(config, codex_home=codex_home, env={"CODEX_HOME": str(codex_home)},
                    handle_signals=False)
    try:
        async with serving(daemon), httpx.AsyncClient(timeout=HTTP_TIMEOUT_S) as http:
            await eventually(lambda: daemon.gateway is not None and daemon.gateway.info["connected"],
                             TURN_WAIT_S)
            await ask(sdk_client(redis), "s-tls", "say hello over tls", "msg-tls",
                      extra_payload={"workdir": str(config.workspaces[0])})
            events = await read_events(redis, "s-tls", "msg-tls", timeout=TURN_WAIT_S)
            record = await record_of(redis, "s-tls", "msg-tls")

            async def counted() -> bool:
                scrape = await http.get(f"http://127.0.0.1:{port}/metrics")
                return completed_gateway_tasks(scrape.text) == 1

            await eventually(counted, TURN_WAIT_S)
            doctor = await check_redis(config)
    finally:
        await redis.aclose()
    final = [e for e in events if e.event_type == "finalAnswer"]
    assert len(final) == 1 and delta_text(final[0]) == answer
    assert record["status"] == "COMPLETED" and record["worker_id"] == "w-tls"
    assert doctor["result"] == "ok" and "(TLS)" in doctor["detail"], doctor
    assert PASSWORD not in json.dumps(doctor)
    assert all(PASSWORD not in r.getMessage() for r in caplog.records)
    state = (config.state_dir / "state.json").read_text()
    assert PASSWORD not in state


async def test_the_tls_redis_refuses_clear_text_and_the_default_user(tls_redis: TlsRedis) -> None:
    """The peer is what it claims: no plain port, no anonymous user, the wrong CA fails."""
    plain = aioredis.Redis.from_url(tls_redis.plain_url, socket_connect_timeout=2, socket_timeout=2)
    anonymous = aioredis.Redis.from_url(f"rediss://127.0.0.1:{tls_redis.port}/0",
                                        ssl_ca_certs=str(tls_redis.ca_file))
    untrusted = aioredis.Redis.from_url(tls_redis.url)  # the system's store: trustme's CA is not in it
    try:
        with pytest.raises(redis_errors.ConnectionError):
            await plain.ping()
        with pytest.raises(redis_errors.AuthenticationError):
            await anonymous.ping()
        with pytest.raises(redis_errors.ConnectionError):
            await untrusted.ping()
    finally:
        for client in (plain, anonymous, untrusted):
            await client.aclose()
