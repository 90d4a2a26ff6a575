"""The wire format: our events against by-framework's emitter, and command parsing."""

from __future__ import annotations

import asyncio
import json
import pickle

import pytest
from by_framework.common.emitter import GatewayDataEmitter
from by_framework.core.protocol.commands import (
    AskAgentCommand,
    CancelTaskCommand,
    ResumeCommand,
)
from by_framework.core.protocol.message_header import MessageHeader

from boss_agent.errors import BadCommand, TaskRejected
from boss_agent.sources.gateway import wire
from boss_agent.sources.gateway.keys import valid_id
from boss_agent.sources.gateway.retry import FAST_POLICY, RedisRetry
from boss_agent.sources.gateway.sink import Publisher, decision_of
from boss_agent.tasks import ApprovalRequest
from tests.support.gateway import sdk_redis

CTX = wire.EventContext(session_id="s1", trace_id="t1", agent_type="boss_local_agent",
                        message_id="msg-1", parent_message_id="msg-0")
IGNORED = ("timestamp",)
IGNORED_DATA = ("id", "created")


def _comparable(raw: str) -> dict:
    event = json.loads(raw)
    for key in IGNORED:
        event.pop(key)
    for key in IGNORED_DATA:
        event["data"].pop(key)
    if event["data"]["contentType"] == "3013":  # boss-agent adds formId to the SDK's form
        delta = event["data"]["choices"][0]["delta"]
        delta["content"] = json.loads(delta["content"])
        delta["content"].pop("formId", None)
    return event


@pytest.mark.redis
async def test_every_event_kind_equals_what_the_sdk_emitter_writes_field_by_field(redis_server):
    redis = sdk_redis(redis_server.url)
    sdk = GatewayDataEmitter(redis, data_stream_name="sdk")
    ours = Publisher(redis, CTX, FAST_POLICY, sub_agent=False)
    ours.stream = "ours"
    ids = {"session_id": "s1", "trace_id": "t1", "source_agent_type": "boss_local_agent",
               "message_id": "msg-1", "parent_message_id": "msg-0"}
    await sdk.emit_chunk(event="Hello", **ids)
    await ours.write(wire.event(CTX, wire.ANSWER_DELTA, "Hello", wire.CT_TEXT))
    await sdk.emit_state(event="thinking", **ids)
    await ours.write(wire.state_event(CTX, "thinking"))
    await sdk.emit_artifact(event="report.md", **ids)
    await ours.write(wire.artifact_event(CTX, "report.md"))
    await sdk.ask_user(event="Allow `pytest`?", **ids)
    await ours.write(wire.ask_user_event(CTX, "Allow `pytest`?", "apr_1"))
    await sdk.emit_chunk(event="All done", event_type="finalAnswer", **ids)
    await ours.write(wire.event(CTX, wire.FINAL_ANSWER, "All done", wire.CT_TEXT))
    await sdk.emit_chunk(event="", event_type="appStreamResponse", **ids)
    await ours.write(wire.event(CTX, wire.APP_STREAM_RESPONSE, "", wire.CT_TEXT))
    card = {"version": 1, "status": "running"}
    await sdk.emit_chunk(event=json.dumps(card), event_type="reasoningLogDelta", content_type="2008", **ids)
    await ours.write(wire.card_event(CTX, card))
    theirs = [_comparable(f["data"]) for _, f in await redis.xrange("sdk")]
    mine = [_comparable(f["data"]) for _, f in await redis.xrange("ours")]
    assert len(mine) == len(theirs) == 7
    for a, b in zip(mine, theirs, strict=True):
        assert a == b
    assert await redis.ttl("ours") > 600_000  # expired like the SDK's: 7 days


@pytest.mark.redis
async def test_data_streams_are_trimmed_approximately(redis_server):
    redis = sdk_redis(redis_server.url)
    publisher = Publisher(redis, CTX, FAST_POLICY, sub_agent=False)
    from boss_agent.sources.gateway import keys

    batch = [wire.state_event(CTX, "x")] * 500
    for _ in range(25):
        await publisher.write(*batch)
    assert await redis.xlen(publisher.stream) < 12_500 and publisher.written == 12_500
    assert await redis.xlen(publisher.stream) >= keys.DATA_STREAM_MAXLEN


def _header(**overrides: str) -> MessageHeader:
    fields = {"message_id": "msg-1", "session_id": "s1", "trace_id": "t1", "target_agent_type": "a"}
    fields.update(overrides)
    return MessageHeader(**fields)


def _entry(command) -> dict:
    return {b"data": json.dumps(command.to_dict()).encode()}


def test_sdk_commands_parse_into_typed_commands():
    ask = wire.parse_command(_entry(AskAgentCommand(
        header=_header(), content=[{"role": "user", "content": "fix it"}],
        extra_payload={"intentCategory": "dispatch_execution", "workdir": "/w", "model": "m"})))
    assert isinstance(ask, wire.Ask)
    task = ask.to_task()
    assert (task.task_id, task.prompt, task.intent, task.workdir) == ("msg-1", "fix it", "dispatch_execution", "/w")
    resume = wire.parse_command(_entry(ResumeCommand(header=_header(), status="COMPLETED",
                                                     reply_data={"decision": "accept"})))
    assert isinstance(resume, wire.Resume) and resume.reply_data == {"decision": "accept"}
    cancel = wire.parse_command(_entry(CancelTaskCommand(header=_header(), target_message_id="msg-9",
                                                         reason="stop", cancel_mode="force")))
    assert isinstance(cancel, wire.Cancel) and cancel.force and cancel.target_message_id == "msg-9"


@pytest.mark.parametrize("data", [
    b"not json", pickle.dumps({"action_type": "ASK_AGENT"}), b"[1, 2]", b'"text"',
    json.dumps({"action_type": "ASK_AGENT", "header": {"message_id": "a:b", "session_id": "s",
                                                       "trace_id": "t"}, "body": {}}).encode(),
    json.dumps({"action_type": "ASK_AGENT", "header": {"message_id": "m", "session_id": "../x",
                                                       "trace_id": "t"}, "body": {}}).encode(),
    json.dumps({"action_type": "EXEC", "header": {"message_id": "m", "session_id": "s",
                                                  "trace_id": "t"}, "body": {}}).encode(),
])
def test_malformed_entries_raise_bad_command_and_nothing_is_unpickled(data):
    with pytest.raises(BadCommand):
        wire.parse_command({b"data": data})


def test_a_bad_ask_body_keeps_its_header_so_the_failure_can_be_reported():
    raw = {"action_type": "ASK_AGENT", "header": {"message_id": "m", "session_id": "s", "trace_id": "t"},
           "body": {"content": 42}}
    with pytest.raises(BadCommand) as caught:
        wire.parse_command({b"data": json.dumps(raw).encode()})
    assert caught.value.header.message_id == "m"
    ask = wire.parse_command({b"data": json.dumps({**raw, "body": {"content": "  "}}).encode()})
    with pytest.raises(TaskRejected):
        ask.to_task()


@pytest.mark.parametrize(("value", "ok"), [
    ("msg-1a2b", True), ("boss_local_agent", True), ("sess.42", True), ("a" * 128, True),
    ("a" * 129, False), ("", False), ("a:b", False), ("a/b", False), ("..", False), ("a..b", False),
    ("*", False), ("-x", False), ("a b", False), ("a\nb", False), (None, False), (7, False),
])
def test_ids_used_in_keys_are_checked_by_a_strict_allow_list(value, ok):
    assert valid_id(value) is ok


def test_a_resume_maps_onto_the_runners_decision_and_unknown_choices_decline():
    request = ApprovalRequest("a", "command", "s", "low", ("accept", "decline", "cancel"))
    header = wire.Header("m", "s", "t")

    def resume(content="", status="", reply=None):
        return wire.Resume(header, content, status, reply, {})

    assert decision_of(resume(reply={"decision": "accept"}), request) == "accept"
    assert decision_of(resume(content="decline"), request) == "decline"
    assert decision_of(resume(reply={"decision": "rm -rf"}), request) == "decline"
    assert decision_of(resume(status="CANCELLED"), request) == "cancel"
    question = ApprovalRequest("q", "userInput", "s", "low", (), ({"id": "q1"},))
    assert decision_of(resume(content="blue"), question) == {"answers": {"q1": ["blue"]}}
    assert decision_of(resume(reply={"answers": {"q1": "x"}}), question) == {"answers": {"q1": ["x"]}}
    assert decision_of(resume(reply={"q1": ["a", "b"], "other": "y"}), question) == {"answers": {"q1": ["a", "b"]}}


def test_a_secret_streamed_in_pieces_never_leaves_as_answer_deltas():
    from boss_agent.progress.card import new_card
    from boss_agent.progress.reducer import reduce
    from boss_agent.sources.gateway.sink import GatewaySink

    async def noop(*_):
        return None

    sink = GatewaySink(Publisher(None, wire.EventContext("s", "t", "a", "m"), RedisRetry(), False),
                       asyncio.Event(), noop, noop)
    secret = "sk-proj-" + "Zq7" * 8
    pieces = ["Your key is ", secret[:10], secret[10:20], secret[20:], " and it works. Done"]
    card, emitted = new_card(), []
    loop = asyncio.new_event_loop()
    try:
        for piece in pieces:
            card = reduce(card, {"method": "item/agentMessage/delta", "params": {"delta": piece}})
            loop.run_until_complete(sink.progress(card))
            emitted += [value for kind, value in sink._outbox if kind == "answer"]
            sink._outbox.clear()
        card = reduce(card, {"method": "boss/finished", "params": {"status": "completed"}})
        loop.run_until_complete(sink.progress(card))
        emitted += [value for kind, value in sink._outbox if kind == "answer"]
    finally:
        loop.close()
    text = "".join(emitted)
    assert secret[:10] not in text and "Zq7Zq7" not in text
    assert text == "Your key is [redacted] and it works. Done"
