"""The Boss device API client (docs/device-api.md), one method per endpoint.

This is the boundary where httpx meets the daemon: transport failures become
``BossUnreachable``, error answers become ``BossApiError`` (``Unauthorized`` for 401,
``TaskGone`` for 404/409 on a task), with the server's message sanitized. Every call
goes through the ``BossApiRetry``; the bearer token is set once on the client and
never formatted into a message.
"""

from __future__ import annotations

import logging
import platform
import socket
from typing import Any, Self
from urllib.parse import quote

import httpx

from boss_agent import __version__
from boss_agent.errors import BossApiError, BossUnreachable, TaskGone, Unauthorized
from boss_agent.redact import sanitize_text
from boss_agent.sources.boss.retry import BossApiRetry, parse_retry_after

logger = logging.getLogger(__name__)

USER_AGENT = f"boss-agent/{__version__}"
REQUEST_TIMEOUT_S = 30.0  # an ordinary call; a healthy server answers in milliseconds
CONNECT_TIMEOUT_S = 10.0  # a server that does not accept in 10 s is down for our purposes
LONG_POLL_MARGIN_S = 15.0  # a long poll may take waitMs plus the server's own slack
CLAIM_WAIT_MS = 25_000  # the contract's long-poll length: short enough for NAT and proxies
APPROVAL_WAIT_MS = 25_000
_TASK_PATH = "/api/v1/master-agent/tasks"


def _task_path(task_id: str, *rest: str) -> str:
    return "/".join([_TASK_PATH, quote(task_id, safe=""), *(quote(p, safe="") for p in rest)])


def _error_from(response: httpx.Response, task_scoped: bool) -> BossApiError:
    code, message = "http_error", response.reason_phrase or "error"
    try:
        body = response.json()
        error = body.get("error") if isinstance(body, dict) else None
        if isinstance(error, dict):
            code = str(error.get("code") or code)
            message = str(error.get("message") or message)
    except ValueError:
        pass
    code, message = sanitize_text(code, limit=80), sanitize_text(message, limit=300)
    status = response.status_code
    if status == 401:
        exc: BossApiError = Unauthorized(status, code, message)
    elif task_scoped and status in (404, 409):
        exc = TaskGone(status, code, message)
    else:
        exc = BossApiError(status, code, message)
    exc.retry_after = parse_retry_after(response.headers.get("Retry-After"))
    return exc


class BossApi:
    """An async client of one control plane; use as ``async with``."""

    def __init__(self, server_url: str, *, device_id: str | None = None, token: str | None = None,
                 policy: BossApiRetry | None = None) -> None:
        self.server_url = server_url.rstrip("/")
        self.device_id = device_id
        self._token = token
        self.policy = policy or BossApiRetry()
        self._client = self._new_client()

    def __repr__(self) -> str:
        return f"BossApi({self.server_url!r}, device_id={self.device_id!r})"

    def _new_client(self) -> httpx.AsyncClient:
        headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        timeout = httpx.Timeout(REQUEST_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
        return httpx.AsyncClient(base_url=self.server_url, headers=headers, timeout=timeout,
                                 follow_redirects=False, trust_env=False)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._client.aclose()

    async def reconnect(self) -> None:
        """Drop every pooled connection (after a suspend they are dead but look alive)."""
        old, self._client = self._client, self._new_client()
        await old.aclose()

    async def _once(self, method: str, path: str, body: dict[str, Any] | None,
                    timeout: float | None, task_scoped: bool) -> dict[str, Any]:
        client = self._client
        try:
            response = await client.request(method, path, json=body,
                                            timeout=httpx.USE_CLIENT_DEFAULT if timeout is None
                                            else httpx.Timeout(timeout, connect=CONNECT_TIMEOUT_S))
        except (httpx.TransportError, RuntimeError) as exc:
            # RuntimeError: the client was closed under us by ``reconnect``; try again.
            raise BossUnreachable(f"{method} {path.split('?')[0]}: {exc.__class__.__name__}") from exc
        if response.status_code >= 400:
            raise _error_from(response, task_scoped)
        try:
            data = response.json() if response.content else {}
        except ValueError:
            data = {}
        return data if isinstance(data, dict) else {}

    async def call(self, method: str, path: str, body: dict[str, Any] | None = None, *,
                   timeout: float | None = None, forever: bool = False,
                   task_scoped: bool = False) -> dict[str, Any]:
        """One API call with the retry policy; returns the JSON body of the 2xx answer."""
        async for attempt in self.policy.retrying(forever=forever):
            with attempt:
                return await self._once(method, path, body, timeout, task_scoped)
        raise AssertionError("unreachable: tenacity reraises")  # pragma: no cover

    # ------------------------------------------------------------------ endpoints

    async def pair(self, code: str, device_name: str | None = None) -> dict[str, Any]:
        """§1: exchange a pairing code for ``{deviceId, deviceToken, heartbeatIntervalMs}``."""
        host = socket.gethostname()
        body = {"pairingCode": code, "deviceName": device_name or host.split(".")[0],
                "hostname": host, "platform": platform.system().lower(),
                "arch": platform.machine().lower(), "agentVersion": __version__}
        return await self.call("POST", "/api/v1/devices/pair", body)

    async def heartbeat(self, body: dict[str, Any], *, timeout: float | None = None) -> dict[str, Any]:
        return await self.call("POST", "/api/v1/devices/heartbeat",
                               {"deviceId": self.device_id, **body}, timeout=timeout)

    async def claim(self, slots: int, wait_ms: int = CLAIM_WAIT_MS) -> list[Any]:
        """§3 long poll; retries until it gets an answer (or a fatal error)."""
        body = {"deviceId": self.device_id, "slots": slots, "waitMs": wait_ms}
        data = await self.call("POST", f"{_TASK_PATH}/claim", body,
                               timeout=wait_ms / 1000 + LONG_POLL_MARGIN_S, forever=True)
        tasks = data.get("tasks")
        return tasks if isinstance(tasks, list) else []

    async def progress(self, task_id: str, seq: int, card: dict[str, Any],
                       refs: dict[str, str] | None = None) -> dict[str, Any]:
        """§4; ``refs``: the live ``codexThreadRef`` and ``turnId`` once known."""
        body = {"deviceId": self.device_id, "seq": seq, "executionProgress": card, **(refs or {})}
        return await self.call("POST", _task_path(task_id, "progress"), body, task_scoped=True)

    async def complete(self, task_id: str, result: dict[str, Any], *, forever: bool = False) -> None:
        body = {"deviceId": self.device_id, **result}
        await self.call("POST", _task_path(task_id, "complete"), body, forever=forever,
                        task_scoped=True)

    async def create_approval(self, task_id: str, body: dict[str, Any]) -> None:
        await self.call("POST", _task_path(task_id, "approvals"),
                        {"deviceId": self.device_id, **body}, task_scoped=True)

    async def withdraw_approval(self, task_id: str, approval_id: str, reason: str) -> None:
        await self.call("POST", _task_path(task_id, "approvals", approval_id, "withdraw"),
                        {"deviceId": self.device_id, "reason": reason}, task_scoped=True)

    async def approval_status(self, task_id: str, approval_id: str,
                              wait_ms: int = APPROVAL_WAIT_MS) -> dict[str, Any]:
        path = f"{_task_path(task_id, 'approvals', approval_id)}?waitMs={int(wait_ms)}"
        return await self.call("GET", path, timeout=wait_ms / 1000 + LONG_POLL_MARGIN_S,
                               task_scoped=True)
