"""A phone on its own network: a namespace joined to this one by a veth pair.

``phone_net`` creates the namespace and the veth pair with one /24 of 10.77.N.0
(N from the test process's pid, so two runs side by side do not collide): the root
namespace's end gets ``.1`` (where the control plane's ``local.listen`` binds), the
phone's end ``.2``. Only these two addresses are ever configured, and both go with
the pair, which the fixture removes even when the test fails. CI runs as root;
``scripts/test.sh`` installs ``iproute2``.

``Phone`` (tests/support/phone.py) runs ``phone_client.py`` inside the namespace and
talks to it over its stdin and stdout. Every test below this folder is marked ``phone``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.layer import apply_marker
from tests.support.phone import PhoneNet


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    apply_marker(items, Path(__file__).parent, "phone")


def _ip(*args: str, check: bool = True) -> None:
    subprocess.run(["ip", *args], check=check, capture_output=True, timeout=30)


@pytest.fixture
def phone_net() -> Iterator[PhoneNet]:
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.fail("the phone tests need root and iproute2 (scripts/test.sh installs it; CI runs as root)")
    tag = os.getpid() % 250 + 1
    net = PhoneNet(f"bossphone{os.getpid()}", f"10.77.{tag}.1", f"10.77.{tag}.2")
    host_if, phone_if = f"bph{os.getpid()}h"[:15], f"bph{os.getpid()}p"[:15]
    try:
        _ip("netns", "add", net.namespace)
        _ip("link", "add", host_if, "type", "veth", "peer", "name", phone_if)
        _ip("link", "set", phone_if, "netns", net.namespace)
        _ip("addr", "add", f"{net.host_ip}/24", "dev", host_if)
        _ip("link", "set", host_if, "up")
        _ip("-n", net.namespace, "addr", "add", f"{net.phone_ip}/24", "dev", phone_if)
        _ip("-n", net.namespace, "link", "set", phone_if, "up")
        _ip("-n", net.namespace, "link", "set", "lo", "up")
        yield net
    finally:
        _ip("link", "del", host_if, check=False)  # takes its peer and both addresses with it
        _ip("netns", "del", net.namespace, check=False)
