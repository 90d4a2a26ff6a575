"""A second `up` (or `devserver`) on a state dir whose control plane runs: one line, nothing changed.

One real ``up --demo --port 0`` process; the second ``up --port 0`` and a
``devserver`` on the same state dir must refuse before they touch anything — the
pairing, the demo model's address in its codex home, the control plane's URL file and
secret stay as the first one wrote them — and the first instance keeps serving.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from boss_agent.controlplane.security import SECRET_FILE, URL_FILE
from boss_agent.daemon.process import InstanceLock
from tests.support.e2e import UpProcess, running_up

pytestmark = pytest.mark.codex

# A refusal comes before any server starts: a few seconds of Python start-up; a second
# instance that does start instead would run until killed.
REFUSAL_TIMEOUT_S = 30


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory, codex_bin: str) -> Iterator[UpProcess]:
    with running_up(tmp_path_factory.mktemp("up-twice"), codex_bin) as process:
        yield process


def _written(up: UpProcess) -> dict[str, bytes]:
    """The files a second instance used to rewrite or delete."""
    files = [up.state_dir / "device.json", up.state_dir / "device_token",
             up.state_dir / "demo-codex-home" / "config.toml",
             up.controlplane_dir / URL_FILE, up.controlplane_dir / SECRET_FILE]
    return {str(path.relative_to(up.state_dir)): path.read_bytes() for path in files}


def _base_url(page_url: str) -> str:
    return page_url.split("/?token=")[0]


async def _refused(up: UpProcess, *args: str) -> str:
    before = _written(up)
    code, out, err = await up.run_cli(*args, timeout_s=REFUSAL_TIMEOUT_S)
    assert code == 1, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert _written(up) == before, "the refused instance changed the running one's files"
    return lines[0]


async def test_a_second_up_refuses_in_one_line_naming_the_running_page(up: UpProcess):
    line = await _refused(up, "up", "--demo", "--port", "0")
    assert "already" in line and _base_url(up.page_url) in line and "`boss-agent page`" in line, line
    assert "ExceptionGroup" not in line and "internal error" not in line


async def test_a_second_up_with_rotate_secret_keeps_the_running_secret(up: UpProcess):
    line = await _refused(up, "up", "--port", "0", "--rotate-secret")
    assert _base_url(up.page_url) in line, line


async def test_devserver_on_the_same_state_dir_refuses_and_leaves_the_url_file(up: UpProcess):
    line = await _refused(up, "devserver", "--port", "0")
    assert _base_url(up.page_url) in line, line
    assert (up.controlplane_dir / URL_FILE).is_file()


async def test_the_first_up_still_serves_after_the_refusals(up: UpProcess):
    code, out, err = await up.run_cli("status", "--json")
    assert code == 0, err
    status = json.loads(out)
    assert status["daemonRunning"] is True and status["daemonPid"] == up.proc.pid
    assert up.page_url.startswith(status["server"] + "/"), "still paired with the first control plane"
    assert up.stop() == 0


async def test_up_while_a_daemon_holds_the_state_dir_refuses_without_pairing(tmp_path: Path, codex_bin: str):
    other = UpProcess(tmp_path, codex_bin)  # only its environment: the "daemon" is this test's lock
    with InstanceLock(other.state_dir):
        code, out, err = await other.run_cli("up", "--demo", "--port", "0", timeout_s=REFUSAL_TIMEOUT_S)
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert "already running" in err and "ExceptionGroup" not in err
    assert not (other.state_dir / "device.json").exists(), "it paired before it knew it could run"
    assert not (other.controlplane_dir / URL_FILE).exists()
