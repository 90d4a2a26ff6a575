"""The local control plane's doors: loopback Host, same Origin, the secret and its sessions.

It listens on loopback, but any web page the user opens can make their browser call
it. Three checks, in ``security_middleware``, in this order:

1. ``Host`` must be a loopback name or address, parsed strictly (``localhost`` or a
   loopback IP literal, then at most a numeric port), else 403 ``forbidden_host``: a
   DNS-rebinding page reaches us under its own host name and stops here.
2. A state-changing request (anything but GET/HEAD/OPTIONS) that carries an
   ``Origin`` must come from this very origin, else 403 ``forbidden_origin`` (CSRF).
   Requests without ``Origin`` (the daemon, the CLI) pass this check.
3. Everything except the device API (``/api/v1/…``, guarded by device tokens), the
   health probe and the ``/?token=`` door needs ``Authorization: Bearer <secret>``
   (the CLI) or the page's session cookie, else 401.

The secret is generated once per installation into ``controlplane.secret`` next to
the database, mode 0600, and replaced by ``rotate_secret``. The cookie never holds
it: browsers send cookies to every port of 127.0.0.1, so any local dev server the user
visits would receive it. It holds a session token instead, ``expiry.nonce.mac`` with
the mac an HMAC of the rest under the secret: it expires, and rotating the secret
voids every session and every printed URL at once. Every credential is compared as
bytes (``hmac.compare_digest`` refuses non-ASCII str), so a malformed one is a 401.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from boss_agent.controlplane.wire import Handler, error_response

SECRET_FILE = "controlplane.secret"
URL_FILE = "controlplane.url"  # written by a running ControlPlane beside its database; how clients find it
OPEN_PATHS = ("/api/health",)
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
SECURITY_HEADERS = {
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}
SESSION_TTL_S = 24 * 3600  # a working day; a session a local server caught dies by the next
MAX_CREDENTIAL_CHARS = 512  # far above a secret or a session token; longer is refused unread
# ``host`` or ``[v6]``, then an optional ASCII port: no userinfo, no second colon, no spaces.
_HOST = re.compile(r"(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<name>[A-Za-z0-9.-]+))(?::(?P<port>[0-9]{1,5}))?", re.ASCII)


def as_bytes(text: str) -> bytes:
    """Any str as bytes, injectively (headers may carry surrogate-escaped bytes)."""
    return text.encode("utf-8", "surrogatepass")


def same(given: str, expected: str) -> bool:
    return len(given) <= MAX_CREDENTIAL_CHARS and hmac.compare_digest(as_bytes(given), as_bytes(expected))


def secret_path(db_path: Path) -> Path:
    return db_path.parent / SECRET_FILE


def _write_secret(path: Path) -> str:
    secret = secrets.token_urlsafe(32)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(secret + "\n")
    os.replace(tmp, path)  # a reader sees the old secret or the new one, never half
    return secret


def load_or_create_secret(db_path: Path, *, rotate: bool = False) -> str:
    """The installation secret stored beside ``db_path``, created (0600) on first use.

    ``rotate`` replaces it: every printed URL and every page session dies with it.
    """
    path = secret_path(db_path)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not rotate:
        try:
            text = path.read_text(encoding="utf-8").strip()
            if text:
                return text
        except FileNotFoundError:
            pass
    return _write_secret(path)


@dataclass
class Doors:
    """The secret (replaceable while running) and the clock sessions expire by."""

    secret: str
    clock: Callable[[], float]

    def _mac(self, payload: str) -> str:
        return hmac.new(as_bytes(self.secret), as_bytes(payload), hashlib.sha256).hexdigest()

    def new_session(self) -> str:
        payload = f"{int(self.clock()) + SESSION_TTL_S}.{secrets.token_urlsafe(16)}"
        return f"{payload}.{self._mac(payload)}"

    def session_valid(self, token: str) -> bool:
        if not token or len(token) > MAX_CREDENTIAL_CHARS:
            return False
        payload, _, mac = token.rpartition(".")
        expiry = payload.split(".", 1)[0]
        if not (expiry.isascii() and expiry.isdigit()) or int(expiry) <= self.clock():
            return False
        return hmac.compare_digest(as_bytes(mac), as_bytes(self._mac(payload)))


DOORS_KEY: web.AppKey[Doors] = web.AppKey("doors", Doors)


def cookie_name(request: web.Request) -> str:
    # Cookies ignore ports: two control planes on one machine need different names.
    port = request.url.port or 80
    return f"boss_cp_{port}"


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
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    return address.is_loopback and (match["v6"] is None) == (address.version == 4)


def origin_allowed(request: web.Request) -> bool:
    origin = request.headers.get("Origin")
    if origin is None:
        return True
    return same(origin.lower(), f"{request.scheme}://{request.host}".lower())


def has_secret(request: web.Request) -> bool:
    doors = request.app[DOORS_KEY]
    auth = request.headers.get("Authorization", "")
    if auth[:7].lower() == "bearer " and same(auth[7:].strip(), doors.secret):
        return True
    return doors.session_valid(request.cookies.get(cookie_name(request), ""))


def needs_secret(request: web.Request) -> bool:
    if request.path.startswith("/api/v1/") or request.path in OPEN_PATHS:
        return False
    return not (request.path == "/" and "token" in request.query)  # the page's door checks it


@web.middleware
async def security_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    if not host_is_loopback(request.headers.get("Host")):
        return error_response(403, "forbidden_host", "this server answers only to loopback host names")
    if request.method not in SAFE_METHODS and not origin_allowed(request):
        return error_response(403, "forbidden_origin", "cross-origin requests are refused")
    if needs_secret(request) and not has_secret(request):
        return error_response(401, "unauthorized", "open the page URL printed by `boss-agent up`")
    return await handler(request)


async def add_security_headers(request: web.Request, response: web.StreamResponse) -> None:
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
