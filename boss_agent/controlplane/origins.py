"""Which way a request came in: loopback, a reverse proxy's public origin, or a direct listener.

Three ways, decided from the socket the request arrived on and its ``Host``:

- ``loopback``: on the loopback listener with a loopback ``Host`` (``localhost`` or a
  loopback IP literal, parsed strictly). The page's origin is ``http://<Host>``.
- ``proxy``: on the loopback listener, from a loopback peer, whose ``Host`` (or, from a
  loopback peer only, ``X-Forwarded-Host``) is exactly the host of one of the owner's
  ``local.public_origins``. The page's origin is that listed ``https://`` origin, and
  the client is the last ``X-Forwarded-For`` hop (again trusted from loopback only):
  ``tailscale serve`` keeps ``Host``, nginx or caddy may send ``X-Forwarded-Host``.
- ``direct``: on a ``local.listen`` (https) listener, with ``Host`` exactly that
  listener's ``ADDRESS:PORT``. ``X-Forwarded-*`` is ignored there: any LAN peer could
  send it.

Anything else is refused (403 ``forbidden_host``): a DNS-rebinding page reaches us
under its own name and stops here. A state-changing request carrying an ``Origin``
must come from the door's origin (CSRF).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Literal

from aiohttp import web


# ``host`` or ``[v6]``, then an optional ASCII port: no userinfo, no second colon, no spaces.
_HOST = re.compile(r"(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<name>[A-Za-z0-9.-]+))(?::(?P<port>[0-9]{1,5}))?", re.ASCII)
MAX_HEADER_CHARS = 512  # a host name or an address list longer than this is not a proxy's


@dataclass(frozen=True)
class Door:
    kind: Literal["loopback", "proxy", "direct"]
    origin: str  # what the browser calls this page: http://127.0.0.1:8765, https://box.ts.net
    client: str  # the client's address, for rate limits

    @property
    def https(self) -> bool:
        return self.origin.startswith("https://")


def host_is_loopback(host: str | None) -> bool:
    """True only for ``localhost`` or a loopback IP literal, with at most a numeric port."""
    match = _HOST.fullmatch(host or "")
    if match is None or (match["port"] is not None and not 0 < int(match["port"]) < 65536):
        return False
    name = (match["v6"] or match["name"]).lower()
    if match["name"] is not None and name.endswith(".") and name != ".":
        name = name[:-1]
    if name == "localhost":
        return True
    return _ip_is_loopback(name) and (match["v6"] is None) == (":" not in name)


def _ip_is_loopback(text: str) -> bool:
    try:
        return ipaddress.ip_address(text.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def host_port(address: str, port: int) -> str:
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


def _netloc(origin: str) -> str:
    netloc = origin.removeprefix("https://")
    return netloc.removesuffix(":443")


def _first(value: str | None) -> str:
    return (value or "").split(",", 1)[0].strip()[:MAX_HEADER_CHARS]


def _last(value: str | None) -> str:
    return (value or "").rsplit(",", 1)[-1].strip()[:MAX_HEADER_CHARS]


def door_of(request: web.Request, public_origins: tuple[str, ...]) -> Door | None:
    """The way ``request`` came in, or None (a foreign ``Host``: refuse it)."""
    sockname = request.transport.get_extra_info("sockname") if request.transport else None
    local = str(sockname[0]) if sockname else "127.0.0.1"
    peer = request.remote or ""
    host = request.headers.get("Host", "")
    if not _ip_is_loopback(local):
        listener = host_port(local, int(sockname[1])) if sockname else ""
        if host.lower() == listener.lower():
            return Door("direct", f"https://{listener}", peer)
        return None
    if _ip_is_loopback(peer) and public_origins:
        asked = (_first(request.headers.get("X-Forwarded-Host")) or host).lower().removesuffix(":443")
        for origin in public_origins:
            if asked == _netloc(origin):
                return Door("proxy", origin, _last(request.headers.get("X-Forwarded-For")) or peer)
    if host_is_loopback(host):
        return Door("loopback", f"http://{host}", peer)
    return None


def origin_allowed(request: web.Request, door: Door) -> bool:
    origin = request.headers.get("Origin")
    return origin is None or origin.lower() == door.origin.lower()
