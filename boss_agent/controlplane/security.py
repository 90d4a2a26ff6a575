"""The local control plane's credentials: the secret, the owner's sessions, the phones.

Which way a request came in (loopback, a reverse proxy's public origin, a direct
https listener) and the Host and Origin rules are ``origins.py``'s. Then, in
``security_middleware``:

1. A foreign ``Host`` is 403 ``forbidden_host``; a state-changing request whose
   ``Origin`` is not the door's own is 403 ``forbidden_origin``.
2. The device API (``/api/v1/…``, guarded by device tokens) is served on loopback only.
3. The page's files, the health probe and the phone-code trade are open (they hold
   no data); everything else needs a principal, else 401:
   - the owner: ``Authorization: Bearer`` with the secret (the CLI) or a session
     (the page script), accepted on loopback only: the secret never leaves the machine;
   - a phone: ``Authorization: Bearer`` with its token, or, on https only, its
     ``__Host-`` cookie. A phone reaches ``PHONE_PATHS`` only (403 ``owner_only``
     elsewhere): never pairing codes, phones or device revocation.

No cookie is ever enough on loopback: browsers send cookies to every port of
127.0.0.1, so any local dev server the user visits would receive it. The page keeps
its session in its own origin's storage and sends it in a header.

The secret is generated once per installation into ``controlplane.secret`` next to
the database, mode 0600, and replaced by ``rotate_secret``. A session is
``expiry.nonce.mac``, the mac an HMAC of the rest under the secret: it expires, and
rotating the secret voids every session and every printed URL at once. Every
credential is compared as bytes (``hmac.compare_digest`` refuses non-ASCII str), so a
malformed one is a 401.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from aiohttp import web

from boss_agent.controlplane.api import CORE_KEY
from boss_agent.controlplane.origins import Door, door_of, origin_allowed
from boss_agent.controlplane.wire import Handler, error_response

SECRET_FILE = "controlplane.secret"
URL_FILE = "controlplane.url"  # written by a running ControlPlane beside its database; how clients find it
# The page's files hold no data (a phone with nothing but a code must load them), the
# health probe says only "ok", and the phone-code trade is rate limited.
OPEN_PATHS = ("/", "/api/health", "/manifest.webmanifest", "/sw.js", "/api/local/phones/pair")
PHONE_PATHS = ("/api/local/state", "/api/local/devices", "/api/local/events", "/api/local/whoami")
PHONE_PREFIXES = ("/api/local/tasks", "/api/local/approvals/")
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
    """The secret (replaceable while running), the clock sessions expire by, the proxies' origins."""

    secret: str
    clock: Callable[[], float]
    public_origins: tuple[str, ...] = ()

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
PHONE_COOKIE = "__Host-boss_phone"  # __Host-: Secure, path /, no Domain: this origin only


@dataclass(frozen=True)
class Principal:
    role: Literal["owner", "phone"]
    phone_id: str | None = None


# Set on every request by the middleware: the way in, and who is calling (absent on open paths).
DOOR: web.RequestKey[Door] = web.RequestKey("door", Door)
PRINCIPAL: web.RequestKey[Principal] = web.RequestKey("principal", Principal)


def door(request: web.Request) -> Door:
    return request[DOOR]


def principal(request: web.Request) -> Principal | None:
    return request.get(PRINCIPAL)


def bearer_of(request: web.Request) -> str:
    auth = request.headers.get("Authorization", "")
    return auth[7:].strip() if auth[:7].lower() == "bearer " else ""


def authenticate(request: web.Request, way: Door) -> Principal | None:
    doors = request.app[DOORS_KEY]
    bearer = bearer_of(request)
    if len(bearer) > MAX_CREDENTIAL_CHARS:
        return None
    if way.kind == "loopback" and bearer and (same(bearer, doors.secret) or doors.session_valid(bearer)):
        return Principal("owner")
    token = bearer or (request.cookies.get(PHONE_COOKIE, "") if way.https else "")
    if not token or len(token) > MAX_CREDENTIAL_CHARS:
        return None
    phone_id = request.app[CORE_KEY].phones.authenticate(token)
    return Principal("phone", phone_id) if phone_id else None


def is_open(request: web.Request) -> bool:
    return request.path in OPEN_PATHS or request.path.startswith("/static/")


def phone_may(path: str) -> bool:
    return path in PHONE_PATHS or path.startswith(PHONE_PREFIXES)


@web.middleware
async def security_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    way = door_of(request, request.app[DOORS_KEY].public_origins)
    if way is None:
        return error_response(403, "forbidden_host", "this server answers only to its own host names")
    if request.method not in SAFE_METHODS and not origin_allowed(request, way):
        return error_response(403, "forbidden_origin", "cross-origin requests are refused")
    request[DOOR] = way
    if request.path.startswith("/api/v1/"):
        if way.kind != "loopback":
            return error_response(404, "not_found", "the device API is served on loopback only")
        return await handler(request)
    if is_open(request):
        return await handler(request)
    who = authenticate(request, way)
    if who is None:
        return error_response(401, "unauthorized", "open the page URL printed by `boss-agent up` or `boss-agent page`")
    if who.role == "phone" and not phone_may(request.path):
        return error_response(403, "owner_only", "a phone cannot do this; use the page on the machine itself")
    request[PRINCIPAL] = who
    return await handler(request)


async def add_security_headers(request: web.Request, response: web.StreamResponse) -> None:
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
