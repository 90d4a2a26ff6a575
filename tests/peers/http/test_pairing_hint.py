"""A refused pairing code says where to get a new one: the page's button for the local
control plane (this machine), the Boss app for a remote server."""

from __future__ import annotations

from pathlib import Path

import pytest

from boss_agent.controlplane import ControlPlane
from boss_agent.errors import BossApiError
from boss_agent.sources.boss.pairing import pair_device, pairing_hint

LOCAL_HINT = "the page's New pairing code button"


async def test_a_wrong_code_for_the_local_control_plane_points_at_the_pages_button(tmp_path: Path) -> None:
    async with ControlPlane(tmp_path / "cp" / "boss.db") as plane:
        with pytest.raises(BossApiError) as refused:
            await pair_device(tmp_path / "state", plane.url, "111-111")
    assert "not valid" in str(refused.value) and LOCAL_HINT in str(refused.value)
    assert "Boss app" not in str(refused.value)


def test_a_remote_server_points_at_the_boss_app() -> None:
    assert pairing_hint("https://boss.example.com") == "create a new one in the Boss app"
    assert LOCAL_HINT in pairing_hint("http://127.0.0.1:8765")
    assert LOCAL_HINT in pairing_hint("http://[::1]:8765")
