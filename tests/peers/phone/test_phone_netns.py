"""A phone on another network reaches the page over https with no cloud (device API, "The page
from the person's phone").

The control plane's ``local.listen`` binds the root namespace's end of a veth pair; the
phone is a process in its own namespace (``conftest.py``) that checks the certificate
against the pairing URL's fingerprint before it sends anything. The device side is
played over the real device API on loopback.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from boss_agent.controlplane import ControlPlane
from boss_agent.controlplane.phones import MAX_WRONG_PHONE_CODES, PHONE_CODE_TTL_S, PHONE_CODE_WINDOW_S
from boss_agent.controlplane.tls import KEY_FILE
from tests.peers.phone.conftest import PhoneNet, phone_in

pytest.register_assert_rewrite("tests.support.controlplane")  # before the import, for its asserts
from tests.support.controlplane import FakeClock, pair  # noqa: E402

pytest_plugins = ("tests.support.controlplane",)  # its fixtures: clock, db_path

PAIR = "/api/local/phones/pair"
REVOKED_STREAM_CLOSES_S = 1.0  # the contract: a revoked phone's open event streams close within a second
CODE_BITS = 5  # per character of the phone code's 32-symbol alphabet


def plane_on(net: PhoneNet, db_path: Path, clock: FakeClock) -> ControlPlane:
    return ControlPlane(db_path, clock=clock, listen=(f"{net.host_ip}:0",))


async def test_a_phone_pairs_over_https_checks_the_fingerprint_approves_and_is_confined(
        phone_net: PhoneNet, db_path: Path, clock: FakeClock):
    async with plane_on(phone_net, db_path, clock) as plane, httpx.AsyncClient(base_url=plane.url) as http:
        offer = plane.create_phone_code()
        parts = urlsplit(offer["url"])
        assert parts.scheme == "https" and parts.hostname == phone_net.host_ip and parts.path == "/"
        fragment = parse_qs(parts.fragment)
        assert fragment == {"pair": [offer["code"]], "fp": [plane.fingerprint]} and offer["fingerprint"]
        assert len(offer["code"].replace("-", "")) * CODE_BITS >= 40
        assert oct((db_path.parent / KEY_FILE).stat().st_mode & 0o777) == "0o600"

        async with phone_in(phone_net, offer["url"]) as phone:
            assert phone.fingerprint == offer["fingerprint"]
            for wrong in ("AAAAA-AAAAA", offer["code"][:-1] + ("2" if offer["code"][-1] != "2" else "3")):
                refused = await phone.call("POST", PAIR, {"code": wrong, "name": "Kris's phone"})
                assert refused["status"] == 400 and refused["body"]["error"]["code"] == "invalid_pairing_code"
            paired = await phone.call("POST", PAIR, {"code": offer["code"], "name": "Kris's phone"})
            assert paired["status"] == 201, paired
            token, phone_id = paired["body"]["token"], paired["body"]["phoneId"]
            cookie = paired["setCookie"]
            assert cookie.startswith("__Host-boss_phone=") and "Secure" in cookie and "HttpOnly" in cookie
            assert "SameSite=Strict" in cookie and "Path=/" in cookie
            assert (await phone.call("POST", PAIR, {"code": offer["code"]}))["status"] == 400  # single use
            assert token not in str(plane.core.db.all("SELECT * FROM phones"))  # stored hashed
            assert plane.phones() == [{"phoneId": phone_id, "name": "Kris's phone",
                                       "createdAt": plane.phones()[0]["createdAt"], "lastSeenAt": None}]

            submitted = await phone.call("POST", "/api/local/tasks", {"prompt": "Fix the parser"}, token)
            assert submitted["status"] == 201, submitted
            task_id = submitted["body"]["taskId"]
            device = await pair(http, plane)
            assert [t["taskId"] for t in await device.claim()] == [task_id]
            assert (await device.ask(task_id, "apr_1")).status_code == 201
            view = await phone.call("GET", f"/api/local/tasks/{task_id}", token=token)
            assert [a["status"] for a in view["body"]["approvals"]] == ["pending"]
            decided = await phone.call("POST", f"/api/local/approvals/{task_id}/apr_1", {"decision": "accept"}, token)
            assert decided["status"] == 200, decided
            assert (await device.poll(task_id, "apr_1")).json() == {"status": "decided", "decision": "accept"}
            by_cookie = await phone.call("GET", "/api/local/state")  # on https the __Host- cookie works too
            assert by_cookie["status"] == 200 and plane.phones()[0]["lastSeenAt"] is not None

            for path in ("/api/v1/devices/heartbeat", "/api/v1/master-agent/tasks/claim"):
                assert (await phone.call("POST", path, {"deviceId": device.device_id}, token))["status"] == 404
            as_device = await http.post("/api/v1/devices/heartbeat", json={"deviceId": device.device_id},
                                        headers={"Authorization": f"Bearer {token}"})
            assert as_device.status_code == 401
            for method, path in (("POST", "/api/local/pairing-codes"), ("POST", "/api/local/phones/codes"),
                                 ("GET", "/api/local/phones"), ("POST", f"/api/local/phones/{phone_id}/revoke"),
                                 ("POST", f"/api/local/devices/{device.device_id}/revoke")):
                answer = await phone.call(method, path, {}, token)
                assert answer["status"] == 403 and answer["body"]["error"]["code"] == "owner_only", path
            secret = await phone.call("GET", "/api/local/state", token=plane.secret)  # never over the network
            assert secret["status"] == 401
            assert (await phone.call("GET", f"/?token={plane.secret}"))["status"] == 401

            stream = phone.open_stream("/api/local/events", token)
            assert (await phone.reply(stream))["event"] == "open"
            plane.revoke_phone(phone_id)
            async with asyncio.timeout(REVOKED_STREAM_CLOSES_S):
                assert (await phone.reply(stream))["event"] == "closed"
            assert (await phone.call("GET", "/api/local/state", token=token))["status"] == 401
            assert (await phone.call("GET", "/api/local/state"))["status"] == 401  # the cookie is dead too
            assert plane.phones() == []


async def test_wrong_codes_from_one_address_are_rate_limited_without_voiding_the_open_codes(
        phone_net: PhoneNet, db_path: Path, clock: FakeClock):
    async with plane_on(phone_net, db_path, clock) as plane, httpx.AsyncClient(base_url=plane.url) as http:
        offer, other = plane.create_phone_code(), plane.create_phone_code()
        async with phone_in(phone_net, offer["url"]) as phone:
            for _ in range(MAX_WRONG_PHONE_CODES):
                assert (await phone.call("POST", PAIR, {"code": "ZZZZZ-ZZZZZ"}))["status"] == 400
            limited = await phone.call("POST", PAIR, {"code": offer["code"]})
            assert limited["status"] == 429 and limited["body"]["error"]["code"] == "too_many_attempts"
            on_loopback = await http.post(PAIR, json={"code": other["code"]})  # another address is not limited
            assert on_loopback.status_code == 201, on_loopback.text
            clock.advance(PHONE_CODE_WINDOW_S + 1)
            assert (await phone.call("POST", PAIR, {"code": offer["code"]}))["status"] == 201  # still valid
            late = plane.create_phone_code()
            clock.advance(PHONE_CODE_TTL_S + 1)
            assert (await phone.call("POST", PAIR, {"code": late["code"]}))["status"] == 400  # expired


async def test_the_certificate_is_made_once_and_a_foreign_host_is_refused(
        phone_net: PhoneNet, db_path: Path, clock: FakeClock):
    async with plane_on(phone_net, db_path, clock) as first:
        fingerprint = first.fingerprint
        url = first.create_phone_code()["url"]
        async with phone_in(phone_net, url) as phone:
            rebound = await phone.call("GET", "/api/health", token=None)
            assert rebound["status"] == 200
    async with plane_on(phone_net, db_path, clock) as second:
        assert second.fingerprint == fingerprint
    async with httpx.AsyncClient(verify=False) as other:  # the Host check, not TLS, is under test here
        listener = f"https://{phone_net.host_ip}"
        async with plane_on(phone_net, db_path, clock) as third:
            port = urlsplit(third.create_phone_code()["url"]).port
            refused = await other.get(f"{listener}:{port}/api/health", headers={"Host": "evil.example"})
            assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden_host"


@pytest.mark.parametrize("entry", ["http://10.77.0.1:8443", "127.0.0.1:8443", "box.local:8443", "10.77.0.1"])
def test_a_listener_that_is_not_https_on_a_network_address_is_refused_at_start(db_path: Path, entry: str):
    from boss_agent.errors import ConfigError

    with pytest.raises(ConfigError):
        ControlPlane(db_path, listen=(entry,))
