"""The gateway end to end: by-framework 0.2.1's GatewayClient as the peer on a real
redis-server, the real Runner on the real codex app-server with the scripted model.

One AppServer (and one scripted model, one CODEX_HOME) serves the module's gateway
tests; each test gets its own redis-server and gateway. The last test runs the whole
``Daemon`` with the gateway enabled, paired to a real ControlPlane.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import redis.asyncio as aioredis
from by_framework.core.protocol.data_message import DataMessage

from boss_agent.codexfeatures import CodexFeatures
from boss_agent.demo import scripted_model as sm
from boss_agent.appserver.client import AppServer
from boss_agent.config import Config
from boss_agent.controlplane import ControlPlane
from boss_agent.runner import Runner
from boss_agent.sources.gateway import Gateway
from boss_agent.sources.gateway.retry import FAST_POLICY
from tests.support import daemon as daemon_support
from tests.support.config import make_config
from tests.support.runner import module_env
from tests.support.gateway import (
    AGENT,
    FAST,
    WAIT_S,
    ask,
    delta_text,
    read_events,
    record_of,
    resume,
    sdk_client,
    sdk_redis,
)
from tests.support.waits import eventually

pytestmark = [pytest.mark.codex, pytest.mark.redis, pytest.mark.asyncio(loop_scope="module")]

TURN_WAIT_S = 60.0  # a real codex turn on a loaded 2-core machine, with slack
PROMPT_CANARY = "ghp_" + "Q7x" * 12  # a GitHub token pasted into the prompt
COMMAND_CANARY = "sk-proj-" + "Zk9" * 10  # an API key inside the model's command text


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, module_model: sm.ScriptedModel, codex_bin: str) -> dict[str, Any]:
    return module_env(tmp_path_factory.mktemp("gwe2e"), module_model, codex_bin, **{"gateway.agent_types": [AGENT]})


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def app(env: dict[str, Any]) -> AsyncIterator[AppServer]:
    async with AppServer.from_config(env["config"], codex_home=env["home"]) as server:
        yield server


@contextlib.asynccontextmanager
async def codex_gateway(config: Config, app: AppServer, home: Path, redis_url: str) -> AsyncIterator[Gateway]:
    """A gateway on the real runner, served until the block ends."""
    runner = Runner(config, app, codex_home=home)
    gateway = Gateway(config, runner, worker_id="w-e2e", redis_url=redis_url, max_concurrent=2,
                      timing=FAST, retry=FAST_POLICY)
    ready = asyncio.Event()
    async with asyncio.TaskGroup() as tg:
        job = tg.create_task(gateway.run(ready))
        async with asyncio.timeout(WAIT_S):
            await ready.wait()
        try:
            yield gateway
        finally:
            job.cancel()


@contextlib.asynccontextmanager
async def boss_and_gateway_daemon(tmp_path: Path, codex_bin: str, redis_url: str, home: Path) -> AsyncIterator[
        tuple[ControlPlane, daemon_support.FaultProxy, aioredis.Redis]]:
    """The daemon on real codex with both sources: paired with a control plane behind a
    ``FaultProxy`` (which keeps what it saw), and serving the gateway on ``redis_url``;
    with the SDK client's Redis connection beside it."""
    async with ControlPlane(tmp_path / "cp" / "boss.db") as cp, \
            daemon_support.FaultProxy(cp.url) as proxy:
        config = make_config(
            tmp_path, server_url=proxy.url, workspace=tmp_path, codex__bin=codex_bin, gateway__enabled=True,
            gateway__redis_url=redis_url, gateway__agent_types=[AGENT])
        redis = sdk_redis(redis_url)
        try:
            async with daemon_support.paired_daemon(config, proxy.url, cp.create_pairing_code(), home):
                yield cp, proxy, redis
        finally:
            await redis.aclose()


def _workdir(env: dict[str, Any], name: str) -> Path:
    path = env["root"] / name
    path.mkdir()
    return path


async def _wire(redis: Any, session: str) -> str:
    """Every event of the session exactly as written to Redis (what any reader can see)."""
    return json.dumps(await redis.xrange(f"byai_gateway:session:{session}:data_stream"))


def _without_forms(wire: str) -> str:
    """The session's events without the ask-user forms (content type 3013)."""
    return json.dumps([entry for entry in json.loads(wire)
                       if json.loads(entry[1]["data"]).get("data", {}).get("contentType") != "3013"])


async def _status_is(redis: Any, session: str, message_id: str, status: str) -> bool:
    return (await record_of(redis, session, message_id)).get("status") == status


def _cards(events: list[DataMessage]) -> list[dict[str, Any]]:
    return [json.loads(delta_text(e)) for e in events
            if e.event_type == "reasoningLogDelta" and e.data["contentType"] == "2008"]


async def test_an_sdk_ask_runs_a_real_codex_turn_and_streams_answer_cards_and_the_final_answer(
        env: dict[str, Any], app: AppServer, module_model: sm.ScriptedModel, redis_server) -> None:
    work = _workdir(env, "answer")
    answer = "The build is green: 42 tests passed."
    module_model.enqueue(sm.turn(sm.message(answer, ["The build ", "is green: ", "42 tests", " passed."])))
    redis = sdk_redis(redis_server.url)
    async with codex_gateway(env["config"], app, env["home"], redis_server.url):
        await ask(sdk_client(redis), "s-ans", f"check the build; token {PROMPT_CANARY}", "msg-ans",
                  extra_payload={"intentCategory": "conversation_reply", "workdir": str(work)})
        events = await read_events(redis, "s-ans", "msg-ans", timeout=TURN_WAIT_S)
        record = await record_of(redis, "s-ans", "msg-ans")
        wire = await _wire(redis, "s-ans")
    await redis.aclose()
    deltas = [delta_text(e) for e in events if e.event_type == "answerDelta"]
    assert "".join(deltas) == answer
    cards = _cards(events)
    assert cards and all(isinstance(c.get("status"), str) for c in cards)
    assert cards[-1]["status"] == "completed"
    final = [e for e in events if e.event_type == "finalAnswer"]
    assert len(final) == 1 and delta_text(final[0]) == answer
    assert events[-1].event_type == "appStreamResponse"
    assert record["status"] == "COMPLETED" and record["worker_id"] == "w-e2e"
    assert PROMPT_CANARY not in wire and "check the build" not in wire
    assert PROMPT_CANARY in module_model.requests[-1].input_texts()[-1]  # the prompt did reach codex


async def test_an_approval_suspends_the_task_and_an_sdk_resume_runs_the_command(
        env: dict[str, Any], app: AppServer, module_model: sm.ScriptedModel, redis_server) -> None:
    work = _workdir(env, "approve")
    command = f"touch approved.txt && echo {COMMAND_CANARY} > key.txt"
    module_model.enqueue(sm.turn(sm.shell_call(command, sandbox_permissions="require_escalated",
                                        justification="the test asks before it runs a command")),
                  sm.turn(sm.message("file created")))
    redis = sdk_redis(redis_server.url)
    client = sdk_client(redis)
    async with codex_gateway(env["config"], app, env["home"], redis_server.url) as gateway:
        await ask(client, "s-apr", "create the file", "msg-apr",
                  extra_payload={"workdir": str(work), "approvalPolicy": "on-request",
                                 "sandbox": "workspace-write"})
        asked = await read_events(redis, "s-apr", "msg-apr", timeout=TURN_WAIT_S,
                                  until=lambda m: m.data["contentType"] == "3013")
        form = json.loads(delta_text(asked[-1]))
        assert form["pluginMachineFields"][0]["fieldCode"] == "user_input"
        # The form is written first, then the record says WAITING_USER and the entry is acked.
        await eventually(lambda: _status_is(redis, "s-apr", "msg-apr", "WAITING_USER"))
        assert gateway.info["suspended"] == 1
        assert not (work / "approved.txt").exists()
        await resume(client, "s-apr", "msg-apr", {"formId": form["formId"], "decision": "accept"})
        events = await read_events(redis, "s-apr", "msg-apr", timeout=TURN_WAIT_S)
        record = await record_of(redis, "s-apr", "msg-apr")
        wire = await _wire(redis, "s-apr")
    await redis.aclose()
    assert (work / "approved.txt").exists() and COMMAND_CANARY in (work / "key.txt").read_text()
    assert record["status"] == "COMPLETED"
    final = [e for e in events if e.event_type == "finalAnswer"]
    assert final and delta_text(final[0]) == "file created"
    assert events[-1].event_type == "appStreamResponse"
    approvals = _cards(events)[-1]["approvals"]
    assert [a["status"] for a in approvals] == ["accepted"]
    # The person consents to the whole command: the ask-user form carries it (device API
    # §6, gateway-protocol.md); nothing else on the stream does, not the cards, not the state.
    # Only the secret in it is masked, there too.
    assert "touch approved.txt && echo [redacted] > key.txt" in form["pluginMachineFields"][0]["description"]
    assert COMMAND_CANARY not in wire
    # The card names the programs (touch, echo), never their arguments.
    for text in (command, "touch approved.txt", "key.txt"):
        assert text not in _without_forms(wire), text


async def test_sdk_cancel_task_interrupts_a_hung_codex_turn_and_closes_the_stream(
        env: dict[str, Any], app: AppServer, module_model: sm.ScriptedModel, redis_server,
        codex_features: CodexFeatures) -> None:
    work = _workdir(env, "cancel")
    before = len(module_model.requests)
    module_model.enqueue(sm.hang(sm.message("partial answer")))
    redis = sdk_redis(redis_server.url)
    client = sdk_client(redis)
    try:
        async with codex_gateway(env["config"], app, env["home"], redis_server.url):
            await ask(client, "s-can", "a long job", "msg-can", extra_payload={"workdir": str(work)})
            await eventually(lambda: len(module_model.requests) > before, timeout=TURN_WAIT_S)  # the turn is in flight
            await read_events(redis, "s-can", "msg-can", timeout=TURN_WAIT_S,
                              until=lambda m: m.event_type == "answerDelta")
            response = await client.cancel_task("msg-can", "s-can", reason="user stop")
            assert response.success, response.error
            events = await read_events(redis, "s-can", "msg-can", timeout=TURN_WAIT_S)
            record = await record_of(redis, "s-can", "msg-can")
            # codex interrupted the turn: it hung up on the model's stream (never released);
            # a codex before 0.160 leaves the request open.
            if codex_features.interrupt_closes_stream:
                await eventually(lambda: module_model.requests[before].stream_end == "peer_closed",
                                 timeout=TURN_WAIT_S)
    finally:
        module_model.release()
        await redis.aclose()
    assert record["status"] == "CANCELLED"
    assert events[-1].event_type == "appStreamResponse"
    assert not [e for e in events if e.event_type == "finalAnswer" and delta_text(e) == "partial answer"]
    assert _cards(events)[-1]["status"] == "cancelled"
    # codex itself stopped: the model is asked nothing more for this thread
    assert len(module_model.requests) == before + 1


async def test_the_daemon_with_the_gateway_enabled_completes_a_boss_task_and_a_gateway_task_on_codex(
        tmp_path: Path, codex_bin: str, module_model: sm.ScriptedModel, env: dict[str, Any], redis_server) -> None:
    work = tmp_path / "work"
    work.mkdir()
    async with boss_and_gateway_daemon(tmp_path, codex_bin, redis_server.url, env["home"]) as (cp, proxy, redis):
        module_model.enqueue(sm.turn(sm.message("answer via redis", ["answer ", "via redis"])))
        await ask(sdk_client(redis), "s-d", "from redis", "msg-d", extra_payload={"workdir": str(work)})
        events = await read_events(redis, "s-d", "msg-d", timeout=TURN_WAIT_S)
        module_model.enqueue(sm.turn(sm.message("answer via boss")))
        task_id = cp.submit_task("from boss", workdir=str(work))
        await proxy.wait_for(lambda: cp.task(task_id)["status"] in ("completed", "failed"),
                             timeout=TURN_WAIT_S)
        record = await record_of(redis, "s-d", "msg-d")
        result = cp.task(task_id)["result"]
    assert record["status"] == "COMPLETED"
    assert delta_text(next(e for e in events if e.event_type == "finalAnswer")) == "answer via redis"
    assert result["status"] == "completed" and result["resultText"] == "answer via boss"
    assert result["backend"] == "app_server"


PASSWORD = "correct horse battery staple"
PASSWORD_ANSWER = f'config: {{"password": "{PASSWORD}"}}'
PASSWORD_DELTAS = ['config: {"password": "correct', " horse", " battery", ' staple"}']
# Longer than both uploaders' coalescing interval (0.25 s): every delta reaches the
# Boss server and the Redis stream as its own card, as on a slow model.
SLOW_MODEL_S = 0.4


def _fragments(secret: str) -> set[str]:
    return {secret[i:i + 4] for i in range(len(secret) - 3)}


async def test_a_password_streamed_in_words_never_leaves_in_part_on_boss_or_redis(
        tmp_path: Path, codex_bin: str, module_model: sm.ScriptedModel, env: dict[str, Any], redis_server) -> None:
    """Issue 26: a quoted value streamed word by word used to go out after its first
    word was masked (``"[redacted] horse``), in progress uploads, the card preview and
    the Redis session stream; and masking the final text made the answer stream re-send."""
    work = tmp_path / "work"
    work.mkdir()
    masked = 'config: {"password": "[redacted]"}'
    async with boss_and_gateway_daemon(tmp_path, codex_bin, redis_server.url, env["home"]) as (cp, proxy, redis):
        module_model.enqueue(sm.turn(sm.message(PASSWORD_ANSWER, PASSWORD_DELTAS), delay_s=SLOW_MODEL_S))
        task_id = cp.submit_task("show the config", workdir=str(work))
        await proxy.wait_for(lambda: cp.task(task_id)["status"] in ("completed", "failed"),
                             timeout=TURN_WAIT_S)
        module_model.enqueue(sm.turn(sm.message(PASSWORD_ANSWER, PASSWORD_DELTAS), delay_s=SLOW_MODEL_S))
        await ask(sdk_client(redis), "s-pw", "show the config", "msg-pw", extra_payload={"workdir": str(work)})
        events = await read_events(redis, "s-pw", "msg-pw", timeout=TURN_WAIT_S)
        stream = await _wire(redis, "s-pw")
        result = cp.task(task_id)["result"]
    uploads = [json.dumps(seen.body) for seen in proxy.requests("/progress")]
    previews = [json.loads(u)["executionProgress"].get("answerPreview") for u in uploads]
    assert len(uploads) >= len(PASSWORD_DELTAS), "every delta should have reached the server"
    assert any(p and p.startswith("config:") for p in previews[:-1]), previews  # the answer did stream
    for where, text in [("progress upload", u) for u in uploads] + [("redis stream", stream)]:
        shown = sorted(f for f in _fragments(PASSWORD) if f in text)
        assert not shown, f"{where} holds {shown}: {text[:800]}"
    assert result["resultText"] == masked
    deltas = [delta_text(e) for e in events if e.event_type == "answerDelta"]
    assert "".join(deltas) == masked, deltas  # append-only: nothing sent twice
    assert delta_text(next(e for e in events if e.event_type == "finalAnswer")) == masked
