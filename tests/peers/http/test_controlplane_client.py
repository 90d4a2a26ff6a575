"""LocalClient, the local API from Python, against a real control plane."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from boss_agent.controlplane import ControlPlane, LocalClient
from boss_agent.errors import ControlPlaneError

from tests.support.controlplane import HTTP_TIMEOUT_S, error_code, pair
from tests.support.waits import within


async def test_follow_yields_every_change_until_the_task_is_finished(http, plane, db_path: Path):
    device = await pair(http, plane)
    async with LocalClient.for_db_dir(db_path.parent) as client:
        task_id = await client.submit("Fix the failing test", workdir="/src/app")
        seen: list[str] = []

        async def follow() -> dict:
            async for view in client.follow(task_id):
                seen.append(view["status"] if view["status"] != "running" else
                            (view["executionProgress"] or {}).get("status", "running"))
            return view

        async with asyncio.TaskGroup() as group:
            attached = plane.core.events.subscribed.current()
            follower = group.create_task(follow())
            await within(attached.wait())
            await device.claim()
            await device.progress(task_id, 1, {"version": 1, "status": "running"})
            await device.ask(task_id, "apr_1")
            await client.decide(task_id, "apr_1", "accept")
            await device.complete(task_id, resultText="fixed")
            final = await within(follower)
    # The first view is read after the stream attached, so it may already be past "queued".
    assert seen[0] in ("queued", "running") and seen[-1] == "completed" and seen.count("completed") == 1
    assert final["result"]["resultText"] == "fixed" and final["approvals"][0]["decision"] == "accept"


async def test_refusals_and_a_missing_server_become_control_plane_errors(plane, db_path: Path, tmp_path: Path):
    async with LocalClient(plane.url, "wrong-secret") as client:
        with pytest.raises(ControlPlaneError) as refused:
            await client.submit("x")
    assert (refused.value.status, refused.value.code) == (401, "unauthorized")
    async with LocalClient.for_db_dir(db_path.parent) as client:
        with pytest.raises(ControlPlaneError) as invalid:
            await client.submit("x", approvalMode="yolo")
        assert (invalid.value.status, invalid.value.code) == (400, "invalid_task")
        code = await client.pairing_code(ttl_s=60)
        assert len(code) == 7
        with pytest.raises(ControlPlaneError) as unknown:
            await client.task("tsk_nope")
        assert unknown.value.code == "task_not_found"
    with pytest.raises(ControlPlaneError) as absent:
        LocalClient.for_db_dir(tmp_path / "nothing-here")
    assert absent.value.code == "not_running"


async def test_a_revoked_devices_parked_claim_gets_401_at_once(db_path: Path):
    async with ControlPlane(db_path) as cp, httpx.AsyncClient(base_url=cp.url, timeout=HTTP_TIMEOUT_S) as client:
        device = await pair(client, cp)
        async with asyncio.TaskGroup() as group:
            parked = cp.core.claim_parked.current()
            claim = group.create_task(device.post("/api/v1/master-agent/tasks/claim", {"waitMs": 30_000}))
            await within(parked.wait())
            cp.revoke_device(device.device_id)
            response = await within(claim)
        assert response.status_code == 401 and error_code(response) == "invalid_token"
