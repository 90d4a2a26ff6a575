"""Chromium at a phone's 390 px, in the phone's network namespace, walks the pairing page.

It opens the pairing URL over https (trusting exactly the certificate whose key the
URL's fingerprint names, as a person who checked it would: ``--ignore-certificate-
errors-spki-list``), pairs, sees the page live, is told when an approval starts
waiting (the title, a notification through the service worker), approves it, and
loses the page once the owner revokes it. The owner's page on loopback adds the
phone ("Add a phone": the QR code as SVG) and lists it. Screenshots land in
``test-artifacts/phone-*.png``.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from boss_agent.controlplane import ControlPlane
from boss_agent.controlplane.tls import CERT_FILE
from tests.peers.phone.conftest import PhoneNet
from tests.support.waits import within
from tests.support.webdriver import PHONE, Netns, chromium

pytest.register_assert_rewrite("tests.support.controlplane")  # before the import, for its asserts
from tests.support.controlplane import pair  # noqa: E402

pytest_plugins = ("tests.support.controlplane",)  # its fixtures: db_path

pytestmark = pytest.mark.browser
ARTIFACTS = Path(__file__).resolve().parents[3] / "test-artifacts"

NOTIFICATIONS = """
const done = arguments[arguments.length - 1];
navigator.serviceWorker.ready.then((r) => r.getNotifications()).then((ns) => done(ns.map((n) => n.title)));
"""


def spki_pin(cert_path: Path) -> str:
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    spki = cert.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return base64.b64encode(hashlib.sha256(spki).digest()).decode()


async def test_a_phone_browser_pairs_is_told_of_an_approval_approves_and_is_revoked(
        phone_net: PhoneNet, db_path: Path, tmp_path: Path):
    async with ControlPlane(db_path, listen=(f"{phone_net.host_ip}:0",)) as plane, \
            httpx.AsyncClient(base_url=plane.url) as http:
        pin = f"--ignore-certificate-errors-spki-list={spki_pin(db_path.parent / CERT_FILE)}"
        async with chromium(tmp_path / "owner") as owner:
            await owner.open(plane.page_url)
            await owner.wait_for('#connection[data-state="live"]')
            await owner.wait_for("#phones-section:not([hidden]) #add-phone")
            await owner.click("#add-phone")
            await owner.wait_for("#phone-offer .qr svg path")
            url = await owner.text("#phone-offer .offer-url")
            assert url.startswith(plane.listen_urls[0] + "/#pair=") and f"fp={plane.fingerprint}" in url
            await owner.screenshot(ARTIFACTS / "phone-owner-add.png")

            net = Netns(phone_net.namespace, phone_net.phone_ip, phone_net.host_ip)
            async with chromium(tmp_path / "phone", PHONE, netns=net, extra_args=(pin,)) as phone:
                await phone.open(url)
                await phone.wait_for("#pair-section:not([hidden]) #pair-fp", plane.fingerprint)
                assert "#pair=" not in await phone.execute("return location.href")  # the code left the address
                await phone.screenshot(ARTIFACTS / "phone-pairing.png")
                await phone.execute("document.querySelector('#pair-form input[name=name]').value = ''")
                await phone.type("#pair-form input[name=name]", "Kris's phone")
                await phone.click("#pair-form button[type=submit]")
                await phone.wait_for('#connection[data-state="live"]')
                await phone.wait_for("#fingerprint", plane.fingerprint)
                assert await phone.execute("return document.getElementById('phones-section').hidden") is True
                await owner.wait_for("#phones .phone .name", "Kris's phone")  # live on the owner's page

                await phone.grant("notifications")
                await phone.execute_async(
                    "navigator.serviceWorker.ready.then(() => arguments[arguments.length - 1](true))")
                device = await pair(http, plane)
                task_id = plane.submit_task("Fix the parser")
                await device.claim()
                await device.ask(task_id, "apr_1", summary="Run the test suite")
                await phone.wait_for("title", "(1) approval waiting")
                await phone.wait_for('body[data-notified="apr_1"]')  # showNotification resolved
                assert await phone.execute_async(NOTIFICATIONS) == ["An approval waits"]
                await phone.screenshot(ARTIFACTS / "phone-approval.png")
                async with asyncio.TaskGroup() as group:
                    poll = group.create_task(device.poll(task_id, "apr_1", wait_ms=30_000))
                    await phone.press(f'[data-task-id="{task_id}"] [data-approval-id="apr_1"] '
                                      'button[data-decision="accept"]')
                    answer = await within(poll)
                assert answer.json() == {"status": "decided", "decision": "accept"}
                await phone.wait_for("title", "Boss")
                assert await phone.execute("return document.title") == "Boss · local control plane"

                await owner.press('#phones .phone button.revoke')
                await phone.wait_for('#connection[data-state="unauthorized"]')
                await owner.wait_for("#no-phones:not([hidden])")
                await phone.screenshot(ARTIFACTS / "phone-revoked.png")
