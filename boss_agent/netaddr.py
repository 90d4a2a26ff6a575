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


def parse_listen(text: str) -> tuple[str, int]:
    """A ``local.listen`` entry, ``[https://]ADDRESS:PORT``, as ``(address, port)``; ValueError.

    Phone listeners are https only: ``http://`` is refused here, at start, because
    every session and prompt would cross the LAN in clear text. The address is an IP
    literal (``[v6]`` bracketed), not loopback (the page already listens there).
    """
    entry = text.strip()
    if entry.lower().startswith("http://"):
        raise ValueError(f"{entry}: plain http on a network address is refused (phone listeners are https only)")
    entry = entry.removeprefix("https://").rstrip("/")
    host, sep, port_text = entry.rpartition(":")
    if not sep or not port_text.isdigit() or not 0 <= int(port_text) < 65536:
        raise ValueError(f"{text!r}: expected ADDRESS:PORT")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(f"{text!r}: the address must be an IP address of this machine") from None
    if address.is_loopback:
        raise ValueError(f"{text!r}: loopback is already served (use --port for the page's own port)")
    return str(address), int(port_text)


def public_origin(text: str) -> str:
    """A ``local.public_origins`` entry as an exact lower-case origin; ValueError."""
    parts = urlsplit(text.strip())
    if parts.scheme != "https" or not parts.hostname or parts.path not in ("", "/") or parts.query \
            or parts.fragment or parts.username or parts.password:
        raise ValueError(f"{text!r} is not an https:// origin (scheme, host and an optional port only)")
    return f"https://{parts.netloc.lower()}"


# How a gateway Redis URL is protected, strongest first (``doctor`` shows it).
REDIS_TLS, REDIS_ACL, REDIS_LOOPBACK, REDIS_INSECURE = "tls", "acl", "loopback", "insecure"


def redis_security(url: str) -> str:
    """``tls`` (rediss://), ``acl`` (a user and a password), ``loopback`` (this machine,
    or a unix socket), else ``insecure``: anyone on the path can XADD tasks."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "rediss":
        return REDIS_TLS
    if scheme == "unix" or address_is_loopback(parts.hostname or ""):
        return REDIS_LOOPBACK
    if parts.username and parts.password:
        return REDIS_ACL
    return REDIS_INSECURE


def redis_url_shown(url: str) -> str:
    """The URL without its password, for a log line or a config error."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    return parts._replace(netloc=f"{parts.username or ''}:***@{netloc}").geturl()


def check_redis_url(url: str, allow_insecure_redis: bool) -> None:
    """Refuse a plain ``redis://`` to another machine without an ACL user, or warn when the
    owner allowed it. Called on load and again by the daemon at every start."""
    if redis_security(url) != REDIS_INSECURE:
        return
    shown = redis_url_shown(url)
    if not allow_insecure_redis:
        raise ConfigError(f"gateway.redis_url {shown} must be rediss:// or name an ACL user and "
                          "password unless it is loopback (set gateway.allow_insecure_redis = true "
                          "to accept it)")
    logger.warning("the gateway Redis %s is plain redis:// without an ACL user: commands and results "
                   "travel in clear text and anyone who reaches it can queue tasks "
                   "(gateway.allow_insecure_redis = true)", shown)
