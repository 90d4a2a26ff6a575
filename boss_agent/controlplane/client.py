"""A Python client of the local API: what `boss-agent task` and `up` use to talk to it.

``LocalClient.for_db_dir(dir)`` finds a running control plane through the files it
keeps beside its database (``controlplane.url`` while it runs, ``controlplane.secret``
always). Every refusal becomes a ``ControlPlaneError`` with the server's status and
code; an unreachable server is ``ControlPlaneError(503, "unreachable")``.

``follow(task_id)`` yields the task's view at once and again on every change, from
the live event stream, until the task is finished.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Self

import httpx

from boss_agent.controlplane.queue import FINISHED
from boss_agent.controlplane.security import SECRET_FILE, URL_FILE
from boss_agent.errors import ControlPlaneError
from boss_agent.jsonshape import obj

REQUEST_TIMEOUT_S = 30.0  # every local call is a quick database operation
STREAM_READ_TIMEOUT_S = 60.0  # the server sends a keepalive every 15 s; four missed means it is gone


def _refusal(response: httpx.Response) -> ControlPlaneError:
    try:
        error = response.json()["error"]
        return ControlPlaneError(response.status_code, str(error["code"]), str(error["message"]))
    except (ValueError, KeyError, TypeError):
        return ControlPlaneError(response.status_code, "http_error", f"HTTP {response.status_code}")


class LocalClient:
    def __init__(self, url: str, secret: str) -> None:
        self.url = url.rstrip("/")
        self._http = httpx.AsyncClient(
            base_url=self.url, headers={"Authorization": f"Bearer {secret}"},
            timeout=httpx.Timeout(REQUEST_TIMEOUT_S, read=STREAM_READ_TIMEOUT_S),
        )

    @classmethod
    def for_db_dir(cls, directory: Path) -> LocalClient:
        """The client of the control plane whose database lives in ``directory``."""
        try:
            url = (directory / URL_FILE).read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            raise ControlPlaneError(503, "not_running", f"no local control plane is running in {directory}") from None
        try:
            secret = (directory / SECRET_FILE).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ControlPlaneError(
                503, "no_secret", f"cannot read the control plane's secret ({exc.strerror})"
            ) from exc
        return cls(url, secret)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._http.aclose()

    async def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        try:
            response = await self._http.request(method, path, json=body)
        except httpx.HTTPError as exc:
            raise ControlPlaneError(503, "unreachable", f"the control plane at {self.url} did not answer") from exc
        if response.status_code >= 400:
            raise _refusal(response)
        return obj(response.json())  # every local API answer is a JSON object

    async def submit(self, prompt: str, **fields: Any) -> str:
        return str((await self._call("POST", "/api/local/tasks", {"prompt": prompt, **fields}))["taskId"])

    async def task(self, task_id: str) -> dict[str, Any]:
        return await self._call("GET", f"/api/local/tasks/{task_id}")

    async def cancel(self, task_id: str) -> str:
        return str((await self._call("POST", f"/api/local/tasks/{task_id}/cancel"))["status"])

    async def decide(self, task_id: str, approval_id: str, decision: str | dict[str, Any],
                     content: dict[str, Any] | None = None) -> None:
        """``content``: an accepted MCP form's fields (elicitation approvals only)."""
        body: dict[str, Any] = {"decision": decision}
        if content is not None:
            body["content"] = content
        await self._call("POST", f"/api/local/approvals/{task_id}/{approval_id}", body)

    async def pairing_code(self, ttl_s: int | None = None) -> str:
        body = {} if ttl_s is None else {"ttlS": ttl_s}
        return str((await self._call("POST", "/api/local/pairing-codes", body))["pairingCode"])

    async def phone_code(self) -> dict[str, Any]:
        """A one-time phone code: ``{url, code, fingerprint, expiresAt, qr}``."""
        return await self._call("POST", "/api/local/phones/codes")

    async def phones(self) -> list[dict[str, Any]]:
        return list((await self._call("GET", "/api/local/phones"))["phones"])

    async def revoke_phone(self, phone_id: str) -> None:
        await self._call("POST", f"/api/local/phones/{phone_id}/revoke")

    async def follow(self, task_id: str) -> AsyncIterator[dict[str, Any]]:
        """The task's view now and after every change, until it is finished."""
        try:
            async with self._http.stream("GET", "/api/local/events") as stream:
                if stream.status_code >= 400:
                    await stream.aread()
                    raise _refusal(stream)
                async for kind, payload in _events(stream.aiter_lines()):
                    if kind == "snapshot":
                        # Subscribed first, read second: nothing falls between the two.
                        view = await self.task(task_id)
                    elif kind == "task" and payload.get("taskId") == task_id:
                        view = payload
                    else:
                        continue
                    yield view
                    if view["status"] in FINISHED:
                        return
        except httpx.HTTPError as exc:
            raise ControlPlaneError(503, "unreachable", "lost the control plane's event stream") from exc
        raise ControlPlaneError(503, "stream_ended", "the control plane closed its event stream")


async def _events(lines: AsyncIterator[str]) -> AsyncIterator[tuple[str, Any]]:
    kind, data = None, []
    async for line in lines:
        if line.startswith("event:"):
            kind = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())
        elif not line and kind and data:
            yield kind, json.loads("\n".join(data))
            kind, data = None, []
