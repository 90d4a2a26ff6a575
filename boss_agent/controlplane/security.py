"""The local control plane's doors: loopback Host, same Origin, the installation secret.

It listens on loopback, but any web page the user opens can make their browser call
it. Three checks, in ``security_middleware``, in this order:

1. ``Host`` must be a loopback name or address, else 403 ``forbidden_host``: a
   DNS-rebinding page reaches us under its own host name and stops here.
2. A state-changing request (anything but GET/HEAD/OPTIONS) that carries an
   ``Origin`` must come from this very origin, else 403 ``forbidden_origin`` (CSRF).
   Requests without ``Origin`` (the daemon, the CLI) pass this check.
3. Everything except the device API (``/api/v1/…``, guarded by device tokens), the
   health probe and the ``/?token=`` door needs the installation secret, as
   ``Authorization: Bearer <secret>`` (CLI) or the page's cookie, else 401.

The secret is generated once per installation into ``controlplane.secret`` next to
the database, mode 0600. The cookie is HttpOnly and SameSite=Strict, and every
answer forbids framing (the Approve button must not be click-jackable).
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import secrets
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
SECRET_KEY: web.AppKey[str] = web.AppKey("secret", str)


def secret_path(db_path: Path) -> Path:
    return db_path.parent / SECRET_FILE


def load_or_create_secret(db_path: Path) -> str:
    """The installation secret stored beside ``db_path``, created (0600) on first use."""
    path = secret_path(db_path)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        text = path.read_text(encoding="utf-8").strip()
        if text:
            return text
    except FileNotFoundError:
        pass
    secret = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(secret + "\n")
    return secret


def cookie_name(request: web.Request) -> str:
    # Cookies ignore ports: two control planes on one machine need different names.
    port = request.url.port or 80
    return f"boss_cp_{port}"


def host_is_loopback(host: str | None) -> bool:
    if not host:
        return False
    name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    if name.startswith("["):
        name = name[1:].split("]", 1)[0]
    name = name.lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def origin_allowed(request: web.Request) -> bool:
    origin = request.headers.get("Origin")
    if origin is None:
        return True
    return hmac.compare_digest(origin.lower(), f"{request.scheme}://{request.host}".lower())


def has_secret(request: web.Request) -> bool:
    secret = request.app[SECRET_KEY]
    auth = request.headers.get("Authorization", "")
    if auth[:7].lower() == "bearer " and hmac.compare_digest(auth[7:].strip(), secret):
        return True
    cookie = request.cookies.get(cookie_name(request), "")
    return bool(cookie) and hmac.compare_digest(cookie, secret)


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
