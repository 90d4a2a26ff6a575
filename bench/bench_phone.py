"""A phone's API call over the https ``local.listen`` listener against loopback http (row 15).

    python -m bench.bench_phone [--samples 200]

Starts the local control plane (``ControlPlane``) in this process with a
``local.listen`` listener on this machine's own non-loopback address (its
self-signed certificate, as a phone gets it), pairs a phone, and asks the page's
state (``GET /api/local/state``, the call a phone's page repeats) with the phone's
token over both doors: https on that address and plain http on loopback, one
keep-alive client each (httpx, the certificate checked against the listener's own),
the calls alternating. A connection to one's own address stays inside the kernel as
loopback does, so the difference is what TLS and the listener add.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import socket
import ssl
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

from boss_agent.controlplane import ControlPlane
from boss_agent.controlplane import tls

SAMPLES = 200
WARMUP = 5  # the first calls pay the TLS handshake and the first state build
CALL = "/api/local/state"


def own_address() -> str:
    """One of this machine's own non-loopback IPv4 addresses (a phone listener needs one)."""
    for addresses in psutil.net_if_addrs().values():
        for address in addresses:
            if address.family == socket.AF_INET and not ipaddress.ip_address(address.address).is_loopback:
                return str(address.address)
    raise RuntimeError("this machine has no non-loopback address for a phone listener")


async def _pair_phone(plane: ControlPlane) -> str:
    owner = {"Authorization": f"Bearer {plane.secret}"}
    async with httpx.AsyncClient(base_url=plane.url, headers=owner) as local:
        code = (await local.post("/api/local/phones/codes")).json()["code"]
        paired = await local.post("/api/local/phones/pair", json={"code": code, "name": "bench phone"})
        paired.raise_for_status()
        token: str = paired.json()["token"]
    return token


async def _time(client: httpx.AsyncClient, sizes: list[int]) -> float:
    start = time.perf_counter()
    answer = await client.get(CALL)
    elapsed = time.perf_counter() - start
    answer.raise_for_status()
    sizes.append(len(answer.content))
    return elapsed


async def run(samples: int = SAMPLES) -> dict[str, Any]:
    address = own_address()
    with tempfile.TemporaryDirectory(prefix="bench-phone-") as tmp:
        db = Path(tmp) / "cp" / "boss.db"
        async with ControlPlane(db, listen=(f"{address}:0",)) as plane:
            cert, _ = tls.certificate(db.parent, (address,))
            token = await _pair_phone(plane)
            headers = {"Authorization": f"Bearer {token}"}
            trust = ssl.create_default_context(cafile=str(cert))
            https_times: list[float] = []
            http_times: list[float] = []
            sizes: list[int] = []
            async with httpx.AsyncClient(base_url=plane.listen_urls[0], headers=headers, verify=trust) as phone, \
                    httpx.AsyncClient(base_url=plane.url, headers=headers) as loopback:
                for index in range(samples + WARMUP):
                    # Alternating which door goes first: neither always follows the other.
                    order = ((phone, https_times), (loopback, http_times))
                    for client, times in order if index % 2 == 0 else reversed(order):
                        elapsed = await _time(client, sizes)
                        if index >= WARMUP:
                            times.append(elapsed)
    https_ms = statistics.median(https_times) * 1000
    http_ms = statistics.median(http_times) * 1000
    return {"https_ms": round(https_ms, 3), "http_ms": round(http_ms, 3),
            "added_ms": round(https_ms - http_ms, 3), "ratio": round(https_ms / http_ms, 2),
            "answer_bytes": int(statistics.median(sizes)), "samples": samples}


def main() -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=SAMPLES, help="calls per door")
    args = parser.parse_args()
    result = asyncio.run(run(args.samples))
    for key, value in result.items():
        print(f"{key:14} {value}")
    return result


if __name__ == "__main__":
    main()
