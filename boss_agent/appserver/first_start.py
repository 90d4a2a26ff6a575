"""The first app-server start on a fresh CODEX_HOME runs alone.

codex before 0.169 creates its sqlite state (``state_5.sqlite`` and others) at start
without a lock of its own: two app-servers starting at once on a brand-new CODEX_HOME
(the daemon's and doctor's, or a restart racing a listener) crash one of them with
"failed to initialize sqlite state runtime". While the home has no state yet, a start
holds an exclusive ``flock`` on a file in it until ``initialize`` has answered; once
the state exists, starts take no lock at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path

logger = logging.getLogger(__name__)

LOCK_FILE = ".boss-agent-first-start.lock"
STATE_GLOB = "state_*.sqlite"  # what codex writes once its state runtime is up
LOCK_POLL_S = 0.05  # flock has no async wait; the holder releases within a start (~0.5 s)


def codex_home_of(codex_home: Path | None) -> Path:
    """The CODEX_HOME a child will use: the given one, else codex's own default."""
    if codex_home is not None:
        return Path(codex_home)
    return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")


def is_fresh(home: Path) -> bool:
    return not any(home.glob(STATE_GLOB))


@contextlib.asynccontextmanager
async def first_start(codex_home: Path | None) -> AsyncIterator[None]:
    """Hold the home's first-start lock when its state does not exist yet."""
    home = codex_home_of(codex_home)
    if not is_fresh(home):
        yield
        return
    try:
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(home / LOCK_FILE, os.O_CREAT | os.O_RDWR, 0o600)
    except OSError as exc:  # an unwritable home: codex's own start reports it
        logger.info("no first-start lock in CODEX_HOME (%s)", exc.__class__.__name__)
        yield
        return
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                await asyncio.sleep(LOCK_POLL_S)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
