"""Xvfb with a window manager and the CUA driver.

The ``desktop`` fixture starts Xvfb and openbox on a free display; the helpers that
drive it are in ``tests/support/desktop.py``. Every test below this folder is marked ``desktop``.
"""

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.desktop import spawn
from tests.support.layer import apply_marker

XVFB_READY_S = 20.0  # Xvfb writes its display number to -displayfd once it accepts clients


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
        procs.append(spawn(["openbox"], env, stdout=subprocess.DEVNULL))
        yield env
    finally:
        for proc in reversed(procs):
            proc.kill()
            proc.wait(timeout=10)
