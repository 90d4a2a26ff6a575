"""`boss-agent phone pair|list|revoke` and `boss-agent page [--qr]` against a running control plane."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from boss_agent.cli.doctor import check_phones
from boss_agent.cli.task_follow import controlplane_dir
from boss_agent.config import load_config
from boss_agent.controlplane import ControlPlane
from tests.peers.phone.conftest import PhoneNet
from tests.support.cli import isolated, run_cli_async

PAIR = "/api/local/phones/pair"


async def test_phone_pair_list_revoke_and_page_drive_the_running_control_plane(tmp_path: Path, phone_net: PhoneNet):
    env = isolated(tmp_path)
    db_path = controlplane_dir(tmp_path / "state") / "controlplane.db"
    async with ControlPlane(db_path, listen=(f"{phone_net.host_ip}:0",)) as plane, \
            httpx.AsyncClient(base_url=plane.url) as http:
        shown = await run_cli_async("phone", "pair", "--json", env=env)
        assert shown.returncode == 0, shown.stderr
        offer = json.loads(shown.stdout)
        assert set(offer) == {"url", "code", "fingerprint", "expiresAt"}
        assert offer["fingerprint"] == plane.fingerprint and offer["url"].startswith(plane.listen_urls[0] + "/#pair=")
        assert plane.secret not in shown.stdout

        drawn = await run_cli_async("phone", "pair", env=env)
        assert drawn.returncode == 0, drawn.stderr
        assert plane.fingerprint in drawn.stdout and "#pair=" in drawn.stdout
        assert "█" in drawn.stdout or "▀" in drawn.stdout  # the QR code, in block characters
        bare = await run_cli_async("phone", "pair", "--no-qr", env=env)
        assert "▀" not in bare.stdout and "█" not in bare.stdout

        paired = await http.post(PAIR, json={"code": offer["code"], "name": "Kris's phone"})
        assert paired.status_code == 201
        phone_id, token = paired.json()["phoneId"], paired.json()["token"]
        listed = await run_cli_async("phone", "list", "--json", env=env)
        rows = json.loads(listed.stdout)
        assert [(r["phoneId"], r["name"]) for r in rows] == [(phone_id, "Kris's phone")]
        assert set(rows[0]) == {"phoneId", "name", "createdAt", "lastSeenAt"}
        assert "Kris's phone" in (await run_cli_async("phone", "list", env=env)).stdout

        revoked = await run_cli_async("phone", "revoke", phone_id, env=env)
        assert revoked.returncode == 0, revoked.stderr
        gone = await http.get("/api/local/state", headers={"Authorization": f"Bearer {token}"})
        assert gone.status_code == 401
        unknown = await run_cli_async("phone", "revoke", "ph_nope", env=env)
        assert unknown.returncode == 1 and len(unknown.stderr.strip().splitlines()) == 1

        config = load_config(tmp_path / "config.toml", environ={"BOSS_STATE_DIR": str(tmp_path / "state"),
                                      "BOSS_LOCAL_LISTEN": f"{phone_net.host_ip}:8443"})
        doctor = check_phones(config)
        assert doctor["result"] == "ok" and plane.fingerprint in doctor["detail"], doctor

        page = await run_cli_async("page", env=env)
        assert page.returncode == 0 and plane.page_url in page.stdout
        with_qr = await run_cli_async("page", "--qr", env=env)
        assert plane.page_url in with_qr.stdout and "#pair=" in with_qr.stdout
    stopped = await run_cli_async("page", env=env)
    assert stopped.returncode == 1 and "boss-agent up" in stopped.stderr
