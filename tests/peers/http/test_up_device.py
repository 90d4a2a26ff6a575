"""`up` keeps one "this machine" across ports, and a device that stopped beating reads offline."""

from __future__ import annotations

from pathlib import Path

from boss_agent.cli.up import pair_this_machine
from boss_agent.controlplane import ControlPlane
from boss_agent.controlplane.devices import OFFLINE_AFTER_S
from boss_agent.identity import load_identity

import pytest

pytest.register_assert_rewrite("tests.support.controlplane")  # before the import, for its asserts
from tests.support.controlplane import FakeClock, pair  # noqa: E402

pytest_plugins = ("tests.support.controlplane",)  # its fixtures: plane, http, clock, db_path


async def test_up_on_a_new_port_keeps_the_one_device_pairing_of_this_machine(db_path: Path, tmp_path: Path):
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    async with ControlPlane(db_path) as first:
        await pair_this_machine(first, state)
        before = load_identity(state)
    async with ControlPlane(db_path) as second:  # port 0: another port
        assert second.url != first.url
        await pair_this_machine(second, state)
        after = load_identity(state)
        assert before is not None and after is not None
        assert after.device_id == before.device_id and after.server_url == second.url
        assert [d["deviceId"] for d in second.devices()] == [before.device_id]
        second.revoke_device(before.device_id)  # a revoked one is paired anew
        await pair_this_machine(second, state)
        again = load_identity(state)
        assert again is not None and again.device_id != before.device_id


async def test_a_device_that_stopped_beating_reads_offline_and_the_page_is_told(http, plane, clock: FakeClock):
    device = await pair(http, plane)
    await device.heartbeat()
    assert plane.devices()[0]["state"] == "idle"
    async with plane.core.events.subscribe() as sub:
        clock.advance(OFFLINE_AFTER_S + 1)
        plane.core.sweep_leases()
        kind, view = sub.queue.get_nowait()
    assert kind == "device" and view["deviceId"] == device.device_id and view["state"] == "offline"
    assert plane.devices()[0]["state"] == "offline"
    await device.heartbeat()
    assert plane.devices()[0]["state"] == "idle"
