"""Xvfb with a window manager and the CUA driver.

The ``desktop`` fixture starts Xvfb and openbox on a free display; the helpers that
drive it are in ``tests/support/desktop.py``. Every test below this folder is marked ``desktop``.
"""

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.desktop import spawn, wm_running
from tests.support.layer import apply_marker

XVFB_READY_S = 20.0  # Xvfb writes its display number to -displayfd once it accepts clients
WM_READY_S = 15.0  # openbox claims the screen within a second; a start that did not is tried again
WM_STARTS = 3  # a clean-clone run once saw openbox never claim the screen (its start is not ours)
WM_POLL_S = 0.1


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    apply_marker(items, Path(__file__).parent, "desktop")


@pytest.fixture
def desktop() -> Iterator[dict[str, str]]:
    """Xvfb + openbox on a free display; yields the environment to reach it."""
    read, write = os.pipe()
    xvfb = subprocess.Popen(["Xvfb", "-displayfd", str(write), "-screen", "0", "1024x768x24", "-nolisten", "tcp"],
                            pass_fds=(write,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(write)
    procs = [xvfb]
    try:
        with os.fdopen(read) as pipe:
            number = pipe.readline().strip()  # blocks until Xvfb is ready (or exits: empty)
        assert number, "Xvfb did not start"
        env = {**os.environ, "DISPLAY": f":{number}"}
        procs.append(_window_manager(env))
        yield env
    finally:
        for proc in reversed(procs):
            proc.kill()
            proc.wait(timeout=10)


def _window_manager(env: dict[str, str]) -> subprocess.Popen[bytes]:
    """openbox on the display, once it has claimed the screen (started again if it did not)."""
    for _ in range(WM_STARTS):
        wm = spawn(["openbox"], env, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + WM_READY_S
        while time.monotonic() < deadline and wm.poll() is None:
            if wm_running(env):
                return wm
            time.sleep(WM_POLL_S)  # polling another process's state: no event to wait on
        wm.kill()
        wm.wait(timeout=10)
    raise AssertionError(f"openbox did not claim the screen in {WM_STARTS} starts")
