"""Which addresses are this machine's own: the loopback rule for servers and listeners.

A Boss server URL must be https unless it names this machine (the device token and
every prompt travel over it), and the local control plane listens on loopback only.
"""

from __future__ import annotations

import ipaddress
import logging
from urllib.parse import urlsplit

from boss_agent.errors import ConfigError

logger = logging.getLogger(__name__)


def address_is_loopback(host: str) -> bool:
    """``localhost`` or a loopback IP literal (bare, no brackets, no port)."""
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def insecure_server_url(url: str) -> bool:
    """An ``http://`` URL to anything but this machine: tokens and prompts in clear text."""
    parts = urlsplit(url)
    return parts.scheme.lower() == "http" and not address_is_loopback(parts.hostname or "")


def check_server_url(url: str | None, allow_insecure_http: bool) -> None:
    """Refuse a clear-text remote server URL, or warn when the owner allowed it.

    Called on load and again by the daemon at every start, for the URL stored at pairing.
    """
    if url is None or not insecure_server_url(url):
        return
    if not allow_insecure_http:
        raise ConfigError(f"server URL {url} must be https:// unless it is loopback "
                          "(set server.allow_insecure_http = true to accept clear text)")
    logger.warning("the Boss server %s is plain http: the device token and every prompt travel in "
                   "clear text (server.allow_insecure_http = true)", url)
