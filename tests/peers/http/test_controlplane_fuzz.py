"""Any JSON at any device or local endpoint is answered with a 2xx or a contract 4xx, never a 500.

Hypothesis drives a synchronous httpx client, so the control plane runs on its own
event loop in a thread here (its methods are loop-bound; the test only speaks HTTP).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from boss_agent.controlplane import ControlPlane

START_TIMEOUT_S = 30  # the server thread binds its port well within this
STOP_TIMEOUT_S = 30

json_scalars = (st.none() | st.booleans() | st.integers(-(2**70), 2**70)
                | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=30))
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=12), inner, max_size=4), max_leaves=12)
KEYS = ("deviceId", "pairingCode", "slots", "waitMs", "seq", "executionProgress", "status", "backend",
        "error", "approvalId", "kind", "summary", "risk", "availableDecisions", "questions", "state",
        "runningTaskIds", "capabilities", "maxConcurrentTasks", "prompt", "workdir", "decision", "ttlS",
        "approvalMode", "intentCategory", "resultText", "fallbackFrom", "codexThreadRef", "turnId")
bodies = st.dictionaries(st.sampled_from(KEYS), json_values, max_size=8) | json_values


class ThreadedPlane:
    """A ControlPlane serving from its own thread and event loop."""

    def __init__(self, db_path: Path) -> None:
        self.db_path = db_path
        self.ready = threading.Event()
        self.plane: ControlPlane | None = None
        self.loop = asyncio.new_event_loop()
        self.stop: asyncio.Event | None = None
        self.thread = threading.Thread(target=self.loop.run_until_complete, args=(self._main(),), daemon=True)

    async def _main(self) -> None:
        self.stop = asyncio.Event()
        try:
            async with ControlPlane(self.db_path, lease_s=3600) as plane:
                self.plane = plane
                self.ready.set()
                await self.stop.wait()
        finally:
            self.ready.set()

    def __enter__(self) -> ControlPlane:
        self.thread.start()
        assert self.ready.wait(START_TIMEOUT_S) and self.plane is not None, "the control plane did not start"
        return self.plane

    def __exit__(self, *exc: object) -> None:
        assert self.stop is not None
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(STOP_TIMEOUT_S)
        self.loop.close()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[dict[str, Any]]:
    with ThreadedPlane(tmp_path / "cp" / "controlplane.sqlite3") as plane, httpx.Client(
            base_url=plane.url, timeout=30) as client:
        local = {"Authorization": f"Bearer {plane.secret}"}
        code = client.post("/api/local/pairing-codes", headers=local).json()["pairingCode"]
        paired = client.post("/api/v1/devices/pair", json={"pairingCode": code}).json()
        device = {"Authorization": f"Bearer {paired['deviceToken']}"}
        task_id = client.post("/api/local/tasks", json={"prompt": "fuzz me"}, headers=local).json()["taskId"]
        claimed = client.post("/api/v1/master-agent/tasks/claim", json={"waitMs": 0}, headers=device).json()
        assert claimed["tasks"][0]["taskId"] == task_id
        client.post(f"/api/v1/master-agent/tasks/{task_id}/approvals", headers=device,
                    json={"approvalId": "apr_1", "kind": "userInput"})
        yield {"client": client, "local": local, "device": device, "task": task_id}


def _paths(task_id: str) -> list[tuple[str, str]]:
    return [
        ("device", "/api/v1/devices/pair"), ("device", "/api/v1/devices/heartbeat"),
        ("device", "/api/v1/master-agent/tasks/claim"),
        ("device", f"/api/v1/master-agent/tasks/{task_id}/progress"),
        ("device", f"/api/v1/master-agent/tasks/{task_id}/approvals"),
        ("device", f"/api/v1/master-agent/tasks/{task_id}/complete"),
        ("local", "/api/local/tasks"), ("local", "/api/local/pairing-codes"),
        ("local", f"/api/local/approvals/{task_id}/apr_1"),
    ]


@settings(max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=bodies, which=st.integers(0, 8), raw=st.booleans())
def test_no_json_body_makes_an_endpoint_fail_with_a_500(served, body, which, raw):
    auth, path = _paths(served["task"])[which]
    if isinstance(body, dict) and path.endswith("/claim"):
        body["waitMs"] = 0  # a fuzzed (or default 25 s) long poll would only make the test slow
    kwargs: dict[str, Any] = {"content": repr(body).encode()} if raw else {"json": body}
    response = served["client"].post(path, headers=served[auth], **kwargs)
    assert response.status_code < 500, (path, body, response.text)
    if response.status_code >= 400:
        error = response.json()["error"]
        assert isinstance(error["code"], str) and isinstance(error["message"], str)
