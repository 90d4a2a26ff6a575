"""A phone, as a process in its own network namespace (``ip netns exec NS python phone_client.py URL``).

It opens the pairing URL's origin over https, checks the server's certificate against
the ``fp=sha256:HEX`` in the URL's fragment (and refuses to go on when it differs),
then trusts exactly that certificate. After that it answers requests read from stdin,
one JSON object a line, each with an ``id``:

    {"id": 1, "method": "POST", "path": "/api/local/phones/pair", "json": {...}, "headers": {...}}
        -> {"id": 1, "status": 201, "body": {...}, "cookies": {...}}
    {"id": 2, "stream": "/api/local/events", "headers": {...}}
        -> {"id": 2, "event": "open", "status": 200} once the first frame arrived,
           then {"id": 2, "event": "closed"} when the server ends the stream

The first line it prints is ``{"ready": true, "fingerprint": "sha256:..."}``.
Cookies the server sets are kept, as a browser keeps them.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import socket
import ssl
import sys
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

TIMEOUT_S = 30.0  # a request over a local veth answers in milliseconds; this only bounds a hang


def peer_certificate(host: str, port: int) -> bytes:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # read it first: it is checked by fingerprint below
    with socket.create_connection((host, port), timeout=TIMEOUT_S) as raw, \
            context.wrap_socket(raw, server_hostname=host) as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return der


def pinned_context(url: str) -> tuple[ssl.SSLContext, str]:
    parts = urlsplit(url)
    expected = parse_qs(parts.fragment)["fp"][0]
    der = peer_certificate(parts.hostname or "", parts.port or 443)
    seen = "sha256:" + hashlib.sha256(der).hexdigest()
    if seen != expected:
        raise SystemExit(f"certificate mismatch: the URL says {expected}, the server shows {seen}")
    context = ssl.create_default_context(cadata=ssl.DER_cert_to_PEM_cert(der))
    context.check_hostname = False  # the IP is in the certificate, but the pin is the fingerprint
    return context, seen


def say(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


async def request(client: httpx.AsyncClient, command: dict[str, Any]) -> None:
    response = await client.request(command.get("method", "GET"), command["path"], json=command.get("json"),
                                    headers=command.get("headers") or {})
    try:
        body = response.json()
    except ValueError:
        body = response.text[:200]
    say({"id": command["id"], "status": response.status_code, "body": body,
         "cookies": dict(client.cookies.items()), "setCookie": response.headers.get("set-cookie")})


async def stream(client: httpx.AsyncClient, command: dict[str, Any]) -> None:
    async with client.stream("GET", command["stream"], headers=command.get("headers") or {}) as response:
        if response.status_code != 200:
            say({"id": command["id"], "event": "refused", "status": response.status_code})
            return
        opened = False
        async for _chunk in response.aiter_bytes():
            if not opened:
                opened = True
                say({"id": command["id"], "event": "open", "status": 200})
    say({"id": command["id"], "event": "closed"})


async def main(url: str) -> None:
    context, fingerprint = pinned_context(url)
    parts = urlsplit(url)
    base = f"{parts.scheme}://{parts.netloc}"
    loop = asyncio.get_running_loop()
    async with httpx.AsyncClient(base_url=base, verify=context, timeout=TIMEOUT_S,
                                 headers={"Origin": base}) as client, asyncio.TaskGroup() as group:
        say({"ready": True, "fingerprint": fingerprint})
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            command = json.loads(line)
            group.create_task(stream(client, command) if "stream" in command else request(client, command))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
