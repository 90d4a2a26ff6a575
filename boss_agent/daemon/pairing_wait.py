"""Waiting for pairing: what ``run`` does on a device that has no usable identity.

A service installed before ``boss-agent pair`` (or a ``device.json`` that got
damaged) must not exit and restart-loop until systemd gives up: the daemon holds its
lock, says ``waiting for pairing`` in its state file, logs that once (a damaged
identity once more, with the reason), and watches the identity files. As soon as
``pair`` has written a readable identity, the daemon starts serving.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

from boss_agent.errors import StateError
from boss_agent.paths import Stamp, file_stamp
from boss_agent.identity import IDENTITY_FILE, TOKEN_FILE, Identity, load_identity

logger = logging.getLogger(__name__)

WAITING = "waiting for pairing"
# How often the identity files are looked at: `pair` is noticed within this, and a
# stat of two files a second costs nothing.
PAIRING_POLL_S = 1.0


def _stamp(state_dir: Path) -> tuple[Stamp, ...]:
    """A change marker of both identity files, None for a missing one."""
    return tuple(file_stamp(state_dir / name) for name in (IDENTITY_FILE, TOKEN_FILE))


def _try_load(state_dir: Path, reported: set[str]) -> Identity | None:
    """The identity, or None; each kind of problem is logged only the first time."""
    try:
        identity = load_identity(state_dir)
    except StateError as exc:
        if "damaged" not in reported:
            reported.add("damaged")
            logger.error("%s; %s (run `boss-agent pair CODE --server URL`)", exc, WAITING)
        return None
    if identity is None and "unpaired" not in reported and "damaged" not in reported:
        reported.add("unpaired")
        logger.warning("this device is not paired; %s (run `boss-agent pair CODE --server URL`)",
                       WAITING)
    return identity


async def wait_for_identity(state_dir: Path, stopping: asyncio.Event,
                            on_wait: Callable[[], None]) -> Identity | None:
    """The stored identity, waiting for one if needed; None when a stop came first.

    ``on_wait`` is called once, when the wait begins (the daemon writes its state).
    """
    reported: set[str] = set()
    stamp = _stamp(state_dir)
    identity = _try_load(state_dir, reported)
    if identity is not None:
        return identity
    on_wait()
    while not stopping.is_set():
        try:
            async with asyncio.timeout(PAIRING_POLL_S):
                await stopping.wait()
        except TimeoutError:
            pass
        now = _stamp(state_dir)
        if now == stamp:
            continue
        stamp = now
        if (identity := _try_load(state_dir, reported)) is not None:
            logger.info("paired as %s; starting", identity.device_id)
            return identity
    return None
