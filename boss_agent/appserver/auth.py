"""Credentials for the app-server's WebSocket listener.

codex accepts two kinds of bearer on the WebSocket handshake (``--ws-auth``): a capability
token read from a file, or a compact HS256 JWT signed with a shared secret's raw bytes.
This module reads those files, mints the JWT (fresh per connection, so its ``exp`` is
always in the future), and refuses to put a bearer on a plain ``ws://`` link that
leaves the machine. Nothing here logs a token; errors name the file, never its content.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import json
import time
from pathlib import Path
from urllib.parse import urlsplit

from boss_agent.config import CodexSettings
from boss_agent.errors import AppServerUnavailable

# A JWT lives only for one handshake; five minutes absorbs clock skew between us and codex.
JWT_LIFETIME_S = 300
# HS256 over a shorter key is guessable offline from one captured token; codex refuses
# such a short secret for its listener too.
MIN_SHARED_SECRET_BYTES = 32
_LOOPBACK_NAMES = ("localhost",)


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def mint_hs256_jwt(
    secret: bytes,
    *,
    issuer: str | None = None,
    audience: str | None = None,
    lifetime_s: int = JWT_LIFETIME_S,
    now: float | None = None,
) -> str:
    """A compact JWS (HS256) with ``exp`` and ``iat``, plus ``iss``/``aud`` when given."""
    issued = int(time.time() if now is None else now)
    claims: dict[str, object] = {"iat": issued, "exp": issued + lifetime_s}
    if issuer:
        claims["iss"] = issuer
    if audience:
        claims["aud"] = audience
    header = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
    payload = _b64url(json.dumps(claims, separators=(",", ":")).encode())
    signing_input = f"{header}.{payload}".encode("ascii")
    signature = hmac.new(secret, signing_input, hashlib.sha256).digest()
    return f"{header}.{payload}.{_b64url(signature)}"


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise AppServerUnavailable(f"cannot read {what} {path.name}: {exc.strerror}") from exc


def bearer_token(codex: CodexSettings) -> str | None:
    """The bearer for this connection, or None when no auth is configured.

    The capability token wins when both are set (it is what a listener we started uses).
    """
    if codex.app_server_auth_token_file is not None:
        token = _read(codex.app_server_auth_token_file, "codex.app_server_auth_token_file")
        text = token.decode("utf-8", "replace").strip()  # codex trims the file too
        if not text:
            raise AppServerUnavailable("codex.app_server_auth_token_file is empty")
        return text
    if codex.app_server_auth_shared_secret_file is not None:
        secret = _read(codex.app_server_auth_shared_secret_file,
                       "codex.app_server_auth_shared_secret_file")
        if len(secret) < MIN_SHARED_SECRET_BYTES:
            raise AppServerUnavailable(
                f"codex.app_server_auth_shared_secret_file holds {len(secret)} bytes; a shared secret "
                f"needs at least {MIN_SHARED_SECRET_BYTES} bytes")
        return mint_hs256_jwt(secret, issuer=codex.app_server_auth_issuer,
                              audience=codex.app_server_auth_audience)
    return None


def is_loopback_host(host: str | None) -> bool:
    if not host:
        return False
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bearer_destination(url: str, bearer: str | None) -> None:
    """Refuse to send a bearer in clear text (``ws://``) to a host off this machine."""
    parts = urlsplit(url)
    if bearer and parts.scheme == "ws" and not is_loopback_host(parts.hostname):
        raise AppServerUnavailable(
            "refusing to send the app-server bearer over plain ws:// to a non-loopback host; "
            "use wss:// or a loopback address"
        )


def authorization_headers(bearer: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {bearer}"} if bearer else {}
