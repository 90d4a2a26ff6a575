"""The web page: ``/`` (and its ``?token=`` door) and the two static files it loads.

The page is plain HTML, JavaScript and CSS from ``static/`` (no build step, nothing
from a CDN). ``/?token=<secret>`` checks the secret, stores a session token derived
from it (never the secret: see ``security.py``) in an HttpOnly, SameSite=Strict cookie
and redirects to ``/``, so the secret leaves the address bar and the browser history
at once.
"""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

from boss_agent.controlplane.security import DOORS_KEY, SESSION_TTL_S, cookie_name, same
from boss_agent.controlplane.wire import error_response

STATIC = Path(__file__).with_name("static")
ASSETS = {"app.js": "text/javascript", "style.css": "text/css"}

routes = web.RouteTableDef()


@routes.get("/")
async def page(request: web.Request) -> web.StreamResponse:
    token = request.query.get("token")
    if token is None:
        return web.FileResponse(STATIC / "index.html", headers={"Content-Type": "text/html; charset=utf-8"})
    doors = request.app[DOORS_KEY]
    if not same(token, doors.secret):
        return error_response(401, "unauthorized", "the token in this URL is not this control plane's")
    response = web.Response(status=303, headers={"Location": "/"})
    response.set_cookie(
        cookie_name(request), doors.new_session(), httponly=True, samesite="Strict", path="/", max_age=SESSION_TTL_S
    )
    return response


@routes.get("/static/{name}")
async def asset(request: web.Request) -> web.StreamResponse:
    name = request.match_info["name"]
    if name not in ASSETS:  # a fixed list: no path ever comes from the URL
        return error_response(404, "not_found", "no such file")
    return web.FileResponse(STATIC / name, headers={"Content-Type": f"{ASSETS[name]}; charset=utf-8"})
