"""The phones' routes: one-time codes, the trade of a code for a credential, list, revoke.

    POST /api/local/phones/codes                 (owner) 201 PhoneCode
    POST /api/local/phones/pair {"code", "name"?}  (open, rate limited) 201 {"phoneId", "token"}
    GET  /api/local/phones                       (owner) {"phones": [{phoneId, name, createdAt, lastSeenAt}]}
    POST /api/local/phones/{phoneId}/revoke      (owner) {}
    GET  /api/local/whoami                       (owner or phone) {"role", "phoneId", "fingerprint"}

PhoneCode: ``{"url", "code", "fingerprint", "expiresAt", "qr"}``: ``url`` is
``BASE/#pair=CODE&fp=sha256:HEX`` (the fragment never reaches a server log or a
referrer), where BASE is the first ``local.listen`` listener, else the first public
origin, else the loopback page (for an SSH tunnel); ``fp`` and ``fingerprint`` only
for a listener whose certificate is ours to vouch for. ``qr`` is the URL's QR code as
rows of ``0``/``1`` (quiet zone included) for the page to draw as SVG.

On an https door the token is also set as the ``__Host-`` cookie (Secure, HttpOnly,
SameSite=Strict); everywhere it works as ``Authorization: Bearer``.
"""

from __future__ import annotations

from dataclasses import dataclass

import segno
from aiohttp import web

from boss_agent.controlplane.api import CORE_KEY
from boss_agent.controlplane.db import iso
from boss_agent.controlplane.security import PHONE_COOKIE, door, principal
from boss_agent.controlplane.wire import json_body, need_str

PHONE_COOKIE_MAX_AGE_S = 400 * 86_400  # the longest a browser keeps a cookie; revocation ends it sooner
QR_BORDER = 2  # modules of quiet zone: enough for a phone camera on a plain page background


@dataclass
class PhoneDoor:
    """Where a phone opens the page (filled in by ``ControlPlane`` once it listens)."""

    base_url: str
    fingerprint: str | None


PHONE_DOOR_KEY: web.AppKey[PhoneDoor] = web.AppKey("phone_door", PhoneDoor)
routes = web.RouteTableDef()


def phone_url(door_: PhoneDoor, code: str) -> str:
    fragment = f"pair={code}" + (f"&fp={door_.fingerprint}" if door_.fingerprint else "")
    return f"{door_.base_url}/#{fragment}"


def qr_rows(text: str) -> list[str]:
    code = segno.make(text, error="m")
    return ["".join("1" if bit else "0" for bit in row) for row in code.matrix_iter(border=QR_BORDER)]


def new_phone_code(app: web.Application) -> dict[str, object]:
    code, expires = app[CORE_KEY].phones.create_code()
    where = app[PHONE_DOOR_KEY]
    url = phone_url(where, code)
    return {"url": url, "code": code, "fingerprint": where.fingerprint, "expiresAt": iso(expires),
            "qr": qr_rows(url)}


@routes.post("/api/local/phones/codes")
async def create_code(request: web.Request) -> web.Response:
    return web.json_response(new_phone_code(request.app), status=201)


@routes.post("/api/local/phones/pair")
async def pair(request: web.Request) -> web.Response:
    body = await json_body(request)
    code = need_str(body, "code", limit=64)
    name = need_str(body, "name", optional=True, limit=100) or "phone"
    phone_id, token = request.app[CORE_KEY].pair_phone(code, name, door(request).client)
    response = web.json_response({"phoneId": phone_id, "token": token}, status=201)
    if door(request).https:
        response.set_cookie(PHONE_COOKIE, token, secure=True, httponly=True, samesite="Strict", path="/",
                            max_age=PHONE_COOKIE_MAX_AGE_S)
    return response


@routes.get("/api/local/phones")
async def phones(request: web.Request) -> web.Response:
    return web.json_response({"phones": request.app[CORE_KEY].phones.phones()})


@routes.post("/api/local/phones/{phoneId}/revoke")
async def revoke(request: web.Request) -> web.Response:
    request.app[CORE_KEY].revoke_phone(request.match_info["phoneId"])
    return web.json_response({})


@routes.get("/api/local/whoami")
async def whoami(request: web.Request) -> web.Response:
    who = principal(request)
    role, phone_id = (who.role, who.phone_id) if who else ("none", None)
    return web.json_response({"role": role, "phoneId": phone_id,
                              "fingerprint": request.app[PHONE_DOOR_KEY].fingerprint})
