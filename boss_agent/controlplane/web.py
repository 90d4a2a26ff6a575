"""The web page: ``/`` (and its ``?token=`` door) and the static files it loads.

The page is plain HTML, JavaScript (ES modules, ``<script type="module">``) and CSS
from ``static/`` (no build step, nothing from a CDN), served to anyone: it holds no
data, and a phone holding nothing but a pairing code must load it.
``/?token=<secret>`` (loopback only) checks the secret and redirects to
``/#session=<session>``, a session token derived from it (never the secret: see
``security.py``), so the secret leaves the address bar and the browser history at
once. The fragment never reaches a server; the page script keeps the session in its
own origin's storage and sends it in a header, so no cookie is set.
"""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

from boss_agent.controlplane.security import DOORS_KEY, door, same
from boss_agent.controlplane.wire import error_response

STATIC = Path(__file__).with_name("static")
# At the root, where a service worker's scope must be and a manifest is looked for.
ROOT_FILES = {"/sw.js": ("sw.js", "text/javascript"), "/manifest.webmanifest": ("manifest.webmanifest",
                                                                                  "application/manifest+json")}
# Every page module, listed once at import: a module script needs a JavaScript type
# (and X-Content-Type-Options: nosniff holds the browser to it).
ASSETS = {**{p.name: "text/javascript" for p in STATIC.glob("*.js") if p.name != "sw.js"},
          "style.css": "text/css", "icon.svg": "image/svg+xml"}

routes = web.RouteTableDef()


@routes.get("/")
async def page(request: web.Request) -> web.StreamResponse:
    token = request.query.get("token")
    if token is None:
        return web.FileResponse(STATIC / "index.html", headers={"Content-Type": "text/html; charset=utf-8"})
    doors = request.app[DOORS_KEY]
    if door(request).kind != "loopback" or not same(token, doors.secret):
        return error_response(401, "unauthorized", "the token in this URL is not this control plane's")
    return web.Response(status=303, headers={"Location": f"/#session={doors.new_session()}"})


@routes.get("/sw.js")
@routes.get("/manifest.webmanifest")
async def root_file(request: web.Request) -> web.StreamResponse:
    name, kind = ROOT_FILES[request.path]
    return web.FileResponse(STATIC / name, headers={"Content-Type": f"{kind}; charset=utf-8"})


@routes.get("/static/{name}")
async def asset(request: web.Request) -> web.StreamResponse:
    name = request.match_info["name"]
    if name not in ASSETS:  # a fixed list: no path ever comes from the URL
        return error_response(404, "not_found", "no such file")
    return web.FileResponse(STATIC / name, headers={"Content-Type": f"{ASSETS[name]}; charset=utf-8"})
