"""Pairing and unpairing this device (device API §1), the core of `pair` / `unpair`.

Pairing is one attempt plus the retry policy's bounded retries for network errors
and 5xx; an invalid (400) or expired (410) code is surfaced at once as a
``BossApiError`` whose message the CLI prints as one line. The token goes straight
into the 0600 token file and is never returned to a caller that prints.
"""

from __future__ import annotations

import logging
from pathlib import Path
from urllib.parse import urlsplit

from boss_agent.errors import BossApiError
from boss_agent.identity import (
    DEFAULT_HEARTBEAT_INTERVAL_MS,
    Identity,
    forget_identity,
    save_identity,
)
from boss_agent.netaddr import address_is_loopback
from boss_agent.sources.boss.api import BossApi
from boss_agent.sources.boss.retry import BossApiRetry

logger = logging.getLogger(__name__)

PAIR_ERRORS = {
    "invalid_pairing_code": "the pairing code is not valid",
    "pairing_code_expired": "the pairing code has expired",
}


def pairing_hint(server_url: str) -> str:
    """Where a new code comes from: this machine's control plane makes one on its page."""
    if address_is_loopback(urlsplit(server_url).hostname or ""):
        return "create a new one with the page's New pairing code button (`boss-agent up` prints the page)"
    return "create a new one in the Boss app"


async def pair_device(state_dir: Path, server_url: str, code: str, *,
                      device_name: str | None = None, policy: BossApiRetry | None = None) -> Identity:
    """Pair with ``server_url`` using ``code``; store and return the identity."""
    async with BossApi(server_url, policy=policy) as api:
        try:
            answer = await api.pair(code.strip(), device_name)
        except BossApiError as exc:
            if exc.code in PAIR_ERRORS:
                message = f"{PAIR_ERRORS[exc.code]}; {pairing_hint(server_url)}"
                raise BossApiError(exc.status, exc.code, message) from None
            raise
    device_id, token = answer.get("deviceId"), answer.get("deviceToken")
    if not isinstance(device_id, str) or not isinstance(token, str) or not device_id or not token:
        raise BossApiError(502, "bad_pairing_answer", "the server's pairing answer lacks an id or token")
    interval = answer.get("heartbeatIntervalMs")
    identity = Identity(api.server_url, device_id, token,
                        interval if isinstance(interval, int) and interval > 0
                        else DEFAULT_HEARTBEAT_INTERVAL_MS)
    save_identity(state_dir, identity)
    logger.info("paired as device %s", device_id)
    return identity


def unpair_device(state_dir: Path) -> bool:
    """Forget the token and device id. The device API has no unpair call, so only locally."""
    return forget_identity(state_dir)
