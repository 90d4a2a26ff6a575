"""Gateway RESUME rules (gateway-protocol.md) on real codex and redis-server.

A turn asks two command approvals, one after the other. Before the fix a RESUME
answered the open form when it named none: a plain-string ``"accept"`` tapped twice
answered the task's *next* approval, and a RESUME carrying the task's message id from
another session answered the form too. Now only a RESUME in the task's own session
that names the open form's ``formId`` accepts; the rest is dropped and counted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from boss_agent.demo import scripted_model as sm
from boss_agent.sources.gateway.wire import CT_USER_INPUT
from tests.support.approvals import TURN_WAIT_S, first_form, gateway_on_codex
from tests.support.gateway import delta_text, ask, read_events, resume, sdk_client, sdk_redis

pytestmark = [pytest.mark.codex, pytest.mark.redis]


def two_commands(request: sm.RecordedRequest) -> sm.Response:
    done = request.tool_outputs()
    if "call_two" in done:
        return sm.text_reply("both asked")
    if "call_one" in done:
        return sm.turn(sm.shell_call("touch two.txt", call_id="call_two"))
    return sm.turn(sm.shell_call("touch one.txt", call_id="call_one"))


async def _second_form(redis: Any, first_id: str) -> dict[str, Any]:
    def other_open_form(message: Any) -> bool:
        if message.data["contentType"] != CT_USER_INPUT:
            return False
        form = json.loads(delta_text(message))
        return bool(form["formId"] != first_id and form["formStatus"] == 0)

    found = await read_events(redis, "s-r", "msg-r", timeout=TURN_WAIT_S, until=other_open_form)
    form: dict[str, Any] = json.loads(delta_text(found[-1]))
    return form


async def test_only_a_resume_naming_the_form_in_the_tasks_own_session_accepts(
        tmp_path: Path, codex_bin: str, workdir: Path, redis_server: Any) -> None:
    redis = sdk_redis(redis_server.url)
    client = sdk_client(redis)
    with sm.ScriptedModel(two_commands) as model:
        home = sm.write_codex_home(tmp_path / "codex-home", model.base_url)
        async with gateway_on_codex(tmp_path, codex_bin, home, workdir, redis_server.url) as gateway:
            await ask(client, "s-r", "run two commands", "msg-r",
                      extra_payload={"workdir": str(workdir), "approvalPolicy": "untrusted"})
            first = await first_form(redis, "s-r", "msg-r")
            # another session names the task's message id and even the right form
            await resume(client, "s-evil", "msg-r", {"formId": first["formId"], "decision": "accept"})
            await resume(client, "s-r", "msg-r", "accept")  # a plain string: the first tap
            await resume(client, "s-r", "msg-r", {"formId": first["formId"], "decision": "accept"})
            second = await _second_form(redis, first["formId"])
            await resume(client, "s-r", "msg-r", "accept")  # the second tap, after the next form opened
            await resume(client, "s-r", "msg-r", {"formId": second["formId"], "decision": "decline"})
            events = await read_events(redis, "s-r", "msg-r", timeout=TURN_WAIT_S)
            counts = dict(gateway.info["counts"])
            state = gateway.status()  # what `boss-agent status` shows
    await redis.aclose()
    assert (workdir / "one.txt").exists()
    assert not (workdir / "two.txt").exists()  # before the fix: the second tap accepted it
    assert counts.get("resume_dropped") == 3, counts
    assert state["gateway_resume_dropped"] == 3
    final = [e for e in events if e.event_type == "finalAnswer"]
    assert final and delta_text(final[0]) == "both asked"
