"""One run per thread (device API §3) on real codex, from both sources.

Task A starts a thread under approval policy ``never`` and its turn is held open by
the scripted model. Task B follows up that thread while A's turn still runs, under
``untrusted``, and its model answer runs a command. Before the fix, B's ``turn/start``
was folded into A's running turn by codex: B's command ran under A's turn and was
routed to A (policy ``never``: nobody was asked), and both tasks reported one turn id.
Now B waits (queued, no slot) until A's turn ends, then runs its own turn: its own
person is asked, and each task names its own turn.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from boss_agent.demo import scripted_model as sm
from tests.support.approvals import TURN_WAIT_S, daemon_on_codex, first_form, gateway_on_codex
from boss_agent.sources.gateway.wire import CT_TASK
from tests.support.gateway import ask, read_events, resume, sdk_client, sdk_redis

pytestmark = pytest.mark.codex

FIRST = "first job: hold the turn"
SECOND = "second job: touch the marker"
MARKER = "second_marker.txt"


class HeldThenCommand:
    """A's turn hangs (until ``release``); B's turn runs ``touch MARKER``, then answers.

    Scripted by the newest user text of each request, so a folded turn (both inputs in
    one request) is scripted as B's too: before the fix, that is how B's command ran.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()

    def __call__(self, request: sm.RecordedRequest) -> sm.Response:
        texts = request.input_texts()
        newest = next((t for t in reversed(texts) if FIRST in t or SECOND in t), "")
        if FIRST in newest:
            return sm.hang(sm.message("first done"))
        if "call_second" in request.tool_outputs():
            return sm.text_reply("second done")
        return sm.turn(sm.shell_call(f"touch {MARKER}", call_id="call_second"))


async def test_a_follow_up_of_a_running_turn_waits_for_it_and_its_own_person_is_asked(
        tmp_path: Path, codex_bin: str, workdir: Path) -> None:
    with sm.ScriptedModel(HeldThenCommand()) as model:
        home = sm.write_codex_home(tmp_path / "codex-home", model.base_url)
        async with daemon_on_codex(tmp_path, codex_bin, home, max_concurrent_tasks=2) as boss:
            first = boss.cp.submit_task(FIRST, workdir=str(workdir), approvalPolicy="never")
            await boss.until(lambda: boss.task(first).get("turnId"))
            thread = boss.task(first)["codexThreadRef"]
            second = boss.cp.submit_task(SECOND, workdir=str(workdir), codexThreadRef=thread,
                                         approvalPolicy="untrusted")
            # B is claimed while A's turn is held: its first card says what it does meanwhile.
            await boss.until(lambda: (boss.task(second)["executionProgress"] or {}).get("status"))
            waiting = boss.task(second)
            model.release()
            approval = await boss.first_approval(second)
            answer = await boss.decide(second, approval["approvalId"], "accept")
            assert answer.status_code == 200, answer.text
            a_view, b_view = await boss.finished(first), await boss.finished(second)
    assert waiting["executionProgress"]["status"] == "queued", waiting
    assert any(w["kind"] == "thread_busy" for w in waiting["executionProgress"]["warnings"])
    assert a_view["approvals"] == [], a_view["approvals"]  # before the fix: routed to A, never asked
    assert [a["kind"] for a in b_view["approvals"]] == ["command"]
    assert a_view["result"]["status"] == b_view["result"]["status"] == "completed", (a_view, b_view)
    assert a_view["result"]["resultText"] == "first done"
    assert b_view["result"]["resultText"] == "second done"
    assert b_view["result"]["codexThreadRef"] == thread
    assert a_view["result"]["turnId"] != b_view["result"]["turnId"]  # before the fix: one turn
    assert (workdir / MARKER).exists()


def _turn_of(events: list[Any]) -> str | None:
    for event in events:
        turn = (event.metadata or {}).get("turnId")
        if turn:
            return str(turn)
    return None


def _running_refs(message: Any) -> bool:
    return bool((message.metadata or {}).get("turnId"))


@pytest.mark.redis
async def test_a_gateway_follow_up_of_a_running_turn_waits_and_its_own_session_gets_the_form(
        tmp_path: Path, codex_bin: str, workdir: Path, redis_server: Any) -> None:
    redis = sdk_redis(redis_server.url)
    client = sdk_client(redis)
    with sm.ScriptedModel(HeldThenCommand()) as model:
        home = sm.write_codex_home(tmp_path / "codex-home", model.base_url)
        async with gateway_on_codex(tmp_path, codex_bin, home, workdir, redis_server.url,
                                    max_concurrent=2):
            await ask(client, "s-a", FIRST, "msg-a",
                      extra_payload={"workdir": str(workdir), "approvalPolicy": "never"})
            started = await read_events(redis, "s-a", "msg-a", timeout=TURN_WAIT_S, until=_running_refs)
            thread = str(started[-1].metadata["codexThreadRef"])
            await ask(client, "s-b", SECOND, "msg-b",
                      extra_payload={"workdir": str(workdir), "codexThreadRef": thread,
                                     "approvalPolicy": "untrusted"})
            # B is read while A's turn is held: its first card says what it does meanwhile.
            b_first = (await read_events(redis, "s-b", "msg-b", timeout=TURN_WAIT_S,
                                         until=lambda m: m.data["contentType"] == CT_TASK))[-1]
            model.release()
            form = await first_form(redis, "s-b", "msg-b")
            await resume(client, "s-b", "msg-b", {"formId": form["formId"], "decision": "accept"})
            a_events = await read_events(redis, "s-a", "msg-a", timeout=TURN_WAIT_S)
            b_events = await read_events(redis, "s-b", "msg-b", timeout=TURN_WAIT_S)
    await redis.aclose()
    assert "thread_busy" in json.dumps(b_first.data)  # before the fix: B was running at once
    assert not [e for e in a_events if e.data["contentType"] == "3013"]  # A's session never asked
    finals = {name: [e for e in events if e.event_type == "finalAnswer"]
              for name, events in (("a", a_events), ("b", b_events))}
    assert finals["a"][0].data["choices"][0]["delta"]["content"] == "first done"
    assert finals["b"][0].data["choices"][0]["delta"]["content"] == "second done"
    a_turn, b_turn = _turn_of(finals["a"]), _turn_of(finals["b"])
    assert a_turn and b_turn and a_turn != b_turn  # before the fix: one turn
    assert (workdir / MARKER).exists()
