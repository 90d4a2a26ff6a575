"""A hand-moved clock and a small device client for the control-plane tests.

The control plane runs for real on 127.0.0.1 port 0 (the ``plane`` fixture of
tests/conftest.py); the tests talk to it with a real httpx client. Only the clock is
injectable, so expiries need no waiting.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import httpx

from boss_agent.controlplane import ControlPlane

HTTP_TIMEOUT_S = 30.0  # above the longest long poll a test opens
EVENT_TIMEOUT_S = 10.0  # bound for anything a test awaits


class FakeClock:
    """Wall-clock time that a test moves forward by hand."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def error_code(response: httpx.Response) -> str:
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, body
    code: str = body["error"]["code"]
    return code


@dataclass
class Device:
    http: httpx.AsyncClient
    device_id: str
    token: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}", "User-Agent": "boss-agent/0.1.0"}

    async def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        return await self.http.post(path, json={"deviceId": self.device_id, **body}, headers=self.headers)

    async def heartbeat(self, **body: Any) -> httpx.Response:
        return await self.post("/api/v1/devices/heartbeat", {"agentVersion": "0.1.0", "state": "idle", **body})

    async def claim(self, slots: int = 1, wait_ms: int = 0) -> list[dict[str, Any]]:
        response = await self.post("/api/v1/master-agent/tasks/claim", {"slots": slots, "waitMs": wait_ms})
        assert response.status_code == 200, response.text
        tasks: list[dict[str, Any]] = response.json()["tasks"]
        return tasks

    async def progress(self, task_id: str, seq: int, card: dict[str, Any]) -> httpx.Response:
        return await self.post(f"/api/v1/master-agent/tasks/{task_id}/progress",
                               {"seq": seq, "executionProgress": card})

    async def complete(self, task_id: str, status: str = "completed", **extra: Any) -> httpx.Response:
        body = {"status": status, "backend": "app_server", "resultText": "done", "error": None, **extra}
        return await self.post(f"/api/v1/master-agent/tasks/{task_id}/complete", body)

    async def ask(self, task_id: str, approval_id: str, **extra: Any) -> httpx.Response:
        body = {"approvalId": approval_id, "kind": "command", "summary": "Run the test suite", "risk": "low",
                "availableDecisions": ["accept", "acceptForSession", "decline", "cancel"], **extra}
        return await self.post(f"/api/v1/master-agent/tasks/{task_id}/approvals", body)

    async def poll(self, task_id: str, approval_id: str, wait_ms: int = 0) -> httpx.Response:
        return await self.http.get(f"/api/v1/master-agent/tasks/{task_id}/approvals/{approval_id}",
                                   params={"waitMs": wait_ms}, headers=self.headers)


async def pair(http: httpx.AsyncClient, plane: ControlPlane, name: str = "kris-mbp") -> Device:
    response = await http.post("/api/v1/devices/pair", json={
        "pairingCode": plane.create_pairing_code(), "deviceName": name, "hostname": f"{name}.local",
        "platform": "linux", "arch": "x86_64", "agentVersion": "0.1.0"})
    assert response.status_code == 201, response.text
    body = response.json()
    return Device(http, body["deviceId"], body["deviceToken"])
