"""The gateway against by-framework 0.2.1's GatewayClient on a real redis-server."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.support.gateway import (
    AGENT,
    ScriptRunner,
    ask,
    delta_text,
    read_events,
    record_of,
    resume,
    running_gateway,
    sdk_client,
    sdk_redis,
)
from tests.support.waits import eventually

pytestmark = pytest.mark.redis


async def test_an_sdk_ask_streams_events_the_sdk_parses_and_ends_with_app_stream_response(redis_server):
    redis = sdk_redis(redis_server.url)
    runner = ScriptRunner()
    async with running_gateway(redis_server.url, runner):
        await ask(sdk_client(redis), "s1", "echo Hello", "msg-1",
                  extra_payload={"intentCategory": "conversation_reply", "attempt": 1})
        events = await read_events(redis, "s1", "msg-1")
    assert [e.event_type for e in events] == ["answerDelta", "finalAnswer", "appStreamResponse"]
    assert delta_text(events[0]) == "Hello" and delta_text(events[1]) == "Hello"
    assert all(e.source_agent_type == AGENT and e.trace_id == "trace-1" for e in events)
    record = await record_of(redis, "s1", "msg-1")
    assert record["status"] == "COMPLETED" and record["worker_id"] == "w1"
    assert [t["status"] for t in record["timeline"]] == ["QUEUED", "RUNNING", "COMPLETED"]
    assert runner.runs == ["msg-1"]
    assert await redis.xpending(f"byai_gateway:ctrl:agent_type:{AGENT}", "agent_engines") \
        == {"pending": 0, "min": None, "max": None, "consumers": []}


async def test_the_progress_card_becomes_coalesced_2008_events_and_its_answer_preview_answer_deltas(redis_server):
    redis = sdk_redis(redis_server.url)
    async with running_gateway(redis_server.url, ScriptRunner()):
        await ask(sdk_client(redis), "s1", "card", "msg-card")
        events = await read_events(redis, "s1", "msg-card")
    answer = "".join(delta_text(e) for e in events if e.event_type == "answerDelta")
    assert answer == "Hello world"
    cards = [json.loads(delta_text(e)) for e in events if e.data["contentType"] == "2008"]
    assert cards and len(cards) < 4  # four card updates, coalesced
    assert cards[-1]["status"] == "completed"
    states = [delta_text(e) for e in events if e.data["contentType"] == "3003"]
    assert states == ["running", "completed"]
    files = [json.loads(delta_text(e)) for e in events if e.data["contentType"] == "3010"]
    assert files == [[{"fileUrl": "report.md"}]]


async def test_an_approval_is_asked_with_the_sdk_form_and_answered_by_a_resume(redis_server):
    redis = sdk_redis(redis_server.url)
    client = sdk_client(redis)
    runner = ScriptRunner()
    async with running_gateway(redis_server.url, runner) as gateway:
        await ask(client, "s1", "approve done", "msg-2")
        asked = await read_events(redis, "s1", "msg-2", until=lambda m: m.data["contentType"] == "3013")
        form = json.loads(delta_text(asked[-1]))
        assert form["pluginMachineFields"][0]["fieldCode"] == "user_input"
        assert "run the tests" in form["pluginMachineFields"][0]["description"]
        assert (await record_of(redis, "s1", "msg-2"))["status"] == "WAITING_USER"
        assert gateway.info["suspended"] == 1
        await resume(client, "s1", "msg-2", {"formId": form["formId"], "decision": "accept"})
        events = await read_events(redis, "s1", "msg-2")
    assert runner.decisions["msg-2"] == "accept"
    assert delta_text(events[-2]) == "done accept" and events[-2].event_type == "finalAnswer"
    assert (await record_of(redis, "s1", "msg-2"))["status"] == "COMPLETED"


async def test_sdk_cancel_task_cancels_a_running_task_and_closes_its_stream(redis_server):
    redis = sdk_redis(redis_server.url)
    client = sdk_client(redis)
    runner = ScriptRunner()
    async with running_gateway(redis_server.url, runner):
        await ask(client, "s1", "wait", "msg-3")
        await asyncio.wait_for(runner.started_event("msg-3").wait(), 15)
        response = await client.cancel_task("msg-3", "s1", reason="user stop")
        assert response.success and response.worker_id == "w1"
        events = await read_events(redis, "s1", "msg-3")
    assert events[-1].event_type == "appStreamResponse"
    assert delta_text(events[-2]) == "cancelled" and events[-2].state_msg == "user stop"
    assert (await record_of(redis, "s1", "msg-3"))["status"] == "CANCELLED"


async def test_a_cancel_of_a_suspended_task_declines_its_approval_and_closes_its_stream(redis_server):
    redis = sdk_redis(redis_server.url)
    client = sdk_client(redis)
    runner = ScriptRunner()
    async with running_gateway(redis_server.url, runner):
        await ask(client, "s1", "approve x", "msg-4")
        await eventually(lambda: _status_is(redis, "s1", "msg-4", "WAITING_USER"))
        assert (await client.cancel_task("msg-4", "s1", reason="never mind")).success
        events = await read_events(redis, "s1", "msg-4")
    assert runner.decisions["msg-4"] == "cancel"
    assert (await record_of(redis, "s1", "msg-4"))["status"] == "CANCELLED"
    assert events[-1].event_type == "appStreamResponse"


async def test_a_call_from_another_agent_streams_reasoning_only_and_replies_with_a_resume(redis_server):
    redis = sdk_redis(redis_server.url)
    async with running_gateway(redis_server.url, ScriptRunner()):
        command = {"action_type": "ASK_AGENT", "header": {
            "message_id": "msg-child", "session_id": "s1", "trace_id": "t", "source_agent_type": "planner",
            "target_agent_type": AGENT, "parent_message_id": "msg-parent", "task_group_id": "",
            "user_code": "", "user_name": "", "metadata": {}},
            "body": {"content": "echo hi", "wait_for_reply": True}}
        await redis.xadd(f"byai_gateway:ctrl:agent_type:{AGENT}", {"data": json.dumps(command)})
        reply = await redis.xread({"byai_gateway:ctrl:agent_type:planner": "0"}, block=15000)
    resume = json.loads(reply[0][1][0][1]["data"])
    assert resume["action_type"] == "RESUME"
    assert resume["header"]["message_id"] == "msg-parent"
    assert resume["header"]["parent_message_id"] == "msg-child"
    assert resume["body"] == {"content": "hi", "status": "COMPLETED", "reply_data": None}
    raw = await redis.xrange("byai_gateway:session:s1:data_stream")
    kinds = {json.loads(f["data"])["event_type"] for _, f in raw}
    assert kinds == {"reasoningLogDelta"}


async def test_a_poison_entry_is_acked_as_failed_and_the_next_task_still_runs(redis_server):
    redis = sdk_redis(redis_server.url)
    stream = f"byai_gateway:ctrl:agent_type:{AGENT}"
    runner = ScriptRunner()
    async with running_gateway(redis_server.url, runner) as gateway:
        await redis.xadd(stream, {"data": "not json {"})
        await redis.xadd(stream, {"data": b"\x80\x04\x95 pickle"})
        await redis.xadd(stream, {"data": json.dumps({"action_type": "ASK_AGENT", "header": {
            "message_id": "../../etc", "session_id": "s1", "trace_id": "t"}, "body": {}})})
        await redis.xadd(stream, {"data": json.dumps({"action_type": "ASK_AGENT", "header": {
            "message_id": "msg-bad", "session_id": "s1", "trace_id": "t"},
            "body": {"content": "echo x", "extra_payload": {"intentCategory": "telepathy"}}})})
        events = await read_events(redis, "s1", "msg-bad")
        await ask(sdk_client(redis), "s1", "echo fine", "msg-ok")
        await read_events(redis, "s1", "msg-ok")
        assert gateway.info["counts"]["poison"] == 3
    assert events[-2].state_msg.startswith("unsupported_intent")
    record = await record_of(redis, "s1", "msg-bad")
    assert record["status"] == "FAILED" and record["error"]["code"] == "unsupported_intent"
    assert runner.runs == ["msg-ok"]
    assert (await redis.xpending(stream, "agent_engines"))["pending"] == 0


async def _status_is(redis, session: str, message_id: str, status: str) -> bool:
    return (await record_of(redis, session, message_id)).get("status") == status


async def test_a_resume_read_by_another_worker_is_forwarded_to_the_one_holding_the_task(redis_server):
    redis = sdk_redis(redis_server.url)
    client = sdk_client(redis)
    runner = ScriptRunner()
    async with running_gateway(redis_server.url, runner, "w1"):
        await ask(client, "s1", "approve ok", "msg-f")
        asked = await read_events(redis, "s1", "msg-f", until=lambda m: m.data["contentType"] == "3013")
        form_id = json.loads(delta_text(asked[-1]))["formId"]
        await eventually(lambda: _status_is(redis, "s1", "msg-f", "WAITING_USER"))
        async with running_gateway(redis_server.url, ScriptRunner(), "w2") as other:
            # Routed straight to w2, which does not hold the task.
            await client.send_message(AGENT, "s1", "accept", action_type="RESUME", message_id="msg-f",
                                      target_worker_id="w2", extra_payload={
                                          "status": "COMPLETED",
                                          "reply_data": {"formId": form_id, "decision": "accept"}})
            events = await read_events(redis, "s1", "msg-f")
            assert other.info["counts"]["forwarded"] == 1
    assert runner.decisions["msg-f"] == "accept" and delta_text(events[-2]) == "ok accept"


async def test_a_resume_for_a_task_suspended_on_a_worker_that_is_gone_fails_it_and_closes_its_stream(redis_server):
    from by_framework.core.registry import WorkerRegistry

    redis = sdk_redis(redis_server.url)
    await WorkerRegistry(redis).save_execution({
        "execution_id": "exec-l", "message_id": "msg-lost", "session_id": "s1", "worker_id": "w-gone",
        "status": "WAITING_USER", "target_agent_type": AGENT, "parent_message_id": ""})
    async with running_gateway(redis_server.url, ScriptRunner()):
        await sdk_client(redis).send_message(AGENT, "s1", "accept", action_type="RESUME",
                                             message_id="msg-lost", extra_payload={"status": "COMPLETED"})
        events = await read_events(redis, "s1", "msg-lost")
    assert events[-1].event_type == "appStreamResponse"
    record = await record_of(redis, "s1", "msg-lost")
    assert record["status"] == "FAILED" and record["error"]["code"] == "agent_restarted"


async def test_a_whole_task_streams_the_same_events_the_sdk_emitter_writes_for_that_content(redis_server):
    from by_framework.common.emitter import GatewayDataEmitter

    redis = sdk_redis(redis_server.url)
    async with running_gateway(redis_server.url, ScriptRunner()):
        await ask(sdk_client(redis), "s1", "echo Hi there", "msg-same")
        ours = await read_events(redis, "s1", "msg-same")
    sdk = GatewayDataEmitter(redis)
    ids = {"session_id": "s2", "trace_id": "trace-1", "source_agent_type": AGENT, "message_id": "msg-same"}
    await sdk.emit_chunk(event="Hi there", **ids)
    await sdk.emit_chunk(event="Hi there", event_type="finalAnswer", **ids)
    await sdk.emit_chunk(event="", event_type="appStreamResponse", **ids)
    theirs = await read_events(redis, "s2", "msg-same")

    def comparable(message):
        event = dict(vars(message), session_id="", timestamp=0)
        event["data"] = dict(message.data, id="", created=0)
        return event

    assert [comparable(m) for m in ours] == [comparable(m) for m in theirs]


async def test_a_runner_that_raises_fails_only_its_task(redis_server):
    redis = sdk_redis(redis_server.url)
    runner = ScriptRunner()
    async with running_gateway(redis_server.url, runner):
        await ask(sdk_client(redis), "s1", "boom", "msg-boom")
        events = await read_events(redis, "s1", "msg-boom")
        await ask(sdk_client(redis), "s1", "echo alive", "msg-alive")
        await read_events(redis, "s1", "msg-alive")
    assert events[-2].state_msg == "internal_error: RuntimeError"
    assert (await record_of(redis, "s1", "msg-boom"))["error"]["code"] == "internal_error"


async def test_stopping_the_gateway_reports_running_tasks_cancelled_and_gives_back_its_lease(redis_server):
    redis = sdk_redis(redis_server.url)
    runner = ScriptRunner()
    async with running_gateway(redis_server.url, runner, "w-stop"):
        await ask(sdk_client(redis), "s1", "hold", "msg-stop")
        await asyncio.wait_for(runner.started_event("msg-stop").wait(), 15)
        assert await redis.exists("byai_gateway:registry:worker:online:w-stop")
    record = await record_of(redis, "s1", "msg-stop")
    assert record["status"] == "CANCELLED" and record["cancel_reason"] == "worker_shutdown"
    events = await read_events(redis, "s1", "msg-stop")
    assert events[-1].event_type == "appStreamResponse"
    assert not await redis.exists("byai_gateway:registry:worker:online:w-stop")
    assert not await redis.sismember(f"byai_gateway:registry:agent_type:workers:{AGENT}", "w-stop")
    assert (await redis.xpending(f"byai_gateway:ctrl:agent_type:{AGENT}", "agent_engines"))["pending"] == 0


async def test_after_stop_accepting_running_tasks_finish_and_new_ones_stay_queued_for_peers(redis_server):
    redis = sdk_redis(redis_server.url)
    client = sdk_client(redis)
    runner = ScriptRunner()
    async with running_gateway(redis_server.url, runner) as gateway:
        await ask(client, "s1", "hold", "msg-drain")
        await asyncio.wait_for(runner.started_event("msg-drain").wait(), 15)
        gateway.stop_accepting()
        await ask(client, "s1", "echo later", "msg-later")
        assert not gateway.info["accepting"]
        runner.gate.set()
        await asyncio.wait_for(gateway.wait_idle(), 15)
        assert (await record_of(redis, "s1", "msg-drain"))["status"] == "COMPLETED"
    assert runner.runs == ["msg-drain"]
    group = (await redis.xinfo_groups(f"byai_gateway:ctrl:agent_type:{AGENT}"))[0]
    assert group["lag"] == 1 and group["pending"] == 0  # still there for another worker
