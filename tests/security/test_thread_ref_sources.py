"""Finding 1, per source: the gateway's extra_payload and the local page refuse a bad ref.

The Boss API source fails such a task through the same ``parse_task``
(tests/security/test_thread_ref_injection.py drives that path against real codex).
"""

from __future__ import annotations

import json

from pathlib import Path

import httpx
import pytest
from by_framework.core.protocol.commands import AskAgentCommand
from by_framework.core.protocol.message_header import MessageHeader

from boss_agent.controlplane.server import ControlPlane
from boss_agent.errors import TaskRejected
from boss_agent.sources.gateway import wire
from tests.support.controlplane import HTTP_TIMEOUT_S, error_code

BYPASS = "--dangerously-bypass-approvals-and-sandbox"


def test_a_gateway_ask_with_an_option_as_thread_ref_is_rejected_as_invalid_thread_ref() -> None:
    header = MessageHeader(message_id="msg-1", session_id="s1", trace_id="t1", target_agent_type="a")
    command = AskAgentCommand(header=header, content=[{"role": "user", "content": "go"}],
                              extra_payload={"codexThreadRef": BYPASS, "sandbox": "read-only"})
    ask = wire.parse_command({b"data": json.dumps(command.to_dict()).encode()})
    assert isinstance(ask, wire.Ask)
    with pytest.raises(TaskRejected) as caught:
        ask.to_task()
    assert caught.value.code == "invalid_thread_ref"


async def test_the_local_page_refuses_a_task_whose_thread_ref_is_not_an_id_or_name(tmp_path: Path) -> None:
    async with ControlPlane(tmp_path / "cp" / "controlplane.sqlite3") as plane, httpx.AsyncClient(
            base_url=plane.url, timeout=HTTP_TIMEOUT_S,
            headers={"Authorization": f"Bearer {plane.secret}"}) as local:
        response = await local.post("/api/local/tasks", json={"prompt": "go", "codexThreadRef": BYPASS})
        assert response.status_code == 400 and error_code(response) == "invalid_thread_ref"
        assert (await local.get("/api/local/tasks")).json()["tasks"] == []
