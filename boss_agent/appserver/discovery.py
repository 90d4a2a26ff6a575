"""Capability discovery: what the local codex offers, normalized and cached on disk.

``discover`` asks the app-server for its models, provider capabilities, skills,
plugins and apps, and normalizes them into ``capabilities.codexAppServer.metadata``
of docs/device-api.md §2. ``DiscoveryCache`` keeps the last good result in
``state_dir/discovery.json`` (mode 0600) for ``codex.app_server_discovery_ttl_ms``; a
codex upgrade (another version) also invalidates it. A failed discovery never blocks a
heartbeat: it warns, keeps the last good data and adds a short sanitized
``metadata.error``.

Model roles (codex's ``model/list`` catalogue is ordered newest first):

* ``defaultModel``: the entry with ``isDefault``, else the first visible one.
* ``fastModel``: the first visible model whose id or name carries a speed hint
  (luna, mini, nano, flash, lite, fast), else one whose description says fast or
  affordable and that is not the default, else the default.
* ``deepModel``: the first visible model whose description says "most capable" or
  whose id carries a depth hint (astra, pro, opus), else the visible model with the
  most reasoning efforts (ties: newest), else the default.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from boss_agent.appserver.client import AppServer
from boss_agent.appserver.methods import AppServerClient
from boss_agent.errors import AppServerError
from boss_agent.redact import sanitize_text
from boss_agent.timefmt import utc_iso

logger = logging.getLogger(__name__)

CACHE_FILE = "discovery.json"
MAX_PAGES = 5  # model/list and app/list page; five pages is far beyond today's catalogue
ERROR_CHARS = 160  # metadata.error is one short line on the phone
# Each discovery call answers in 1-5 ms on an idle codex; this bounds a wedged app-server so a
# heartbeat waiting on discovery still goes out.
DISCOVERY_TIMEOUT_S = 20.0
_FAST_ID = re.compile(r"luna|mini|nano|flash|lite|fast", re.IGNORECASE)
_FAST_TEXT = re.compile(r"\b(fast|affordable|quick)\b", re.IGNORECASE)
_DEEP_ID = re.compile(r"astra|\bpro\b|-pro|opus", re.IGNORECASE)
_DEEP_TEXT = re.compile(r"most capable", re.IGNORECASE)


async def discover(client: AppServerClient, version: str, *,
                   cwds: list[Path] | None = None) -> dict[str, Any]:
    """The metadata dict of docs/device-api.md §2, from a live client.

    ``cwds`` are the directories whose skills count (default: the home directory).
    """
    models = await _paged(client, "model/list", {})
    provider = await client.call("modelProvider/capabilities/read", {})
    skills = await client.call("skills/list", {"cwds": [str(c) for c in cwds or [Path.home()]]})
    plugins = await client.call("plugin/list", {})
    apps = await _paged(client, "app/list", {})
    logger.debug("discovered codex %s capabilities", version)
    return {**model_roles(models),
            "providerCapabilities": provider if isinstance(provider, dict) else {},
            "skills": _names(s for entry in skills.get("data") or [] for s in entry.get("skills") or []
                             if s.get("enabled", True)),
            "plugins": _names(p for market in plugins.get("marketplaces") or []
                              for p in market.get("plugins") or []
                              if p.get("installed") and p.get("enabled")),
            "apps": _names(a for a in apps if a.get("isEnabled", True) is not False),
            "discoveredAt": utc_iso()}


async def _paged(client: AppServerClient, method: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor = None
    for _ in range(MAX_PAGES):
        page = await client.call(method, {**params, **({"cursor": cursor} if cursor else {})})
        items += [item for item in page.get("data") or [] if isinstance(item, dict)]
        cursor = page.get("nextCursor")
        if not cursor:
            break
    return items


def _names(entries: Any) -> list[dict[str, str]]:
    seen: dict[str, None] = {}
    for entry in entries:
        name = entry.get("name") if isinstance(entry, dict) else None
        if isinstance(name, str) and name:
            seen.setdefault(name)
    return [{"name": name} for name in seen]


def model_roles(catalogue: list[dict[str, Any]]) -> dict[str, Any]:
    """models / defaultModel / fastModel / deepModel by the rule in the module docstring."""
    visible = [m for m in catalogue if not m.get("hidden") and isinstance(m.get("id"), str)]
    default = next((m["id"] for m in visible if m.get("isDefault")), visible[0]["id"] if visible else None)

    def first(pick: Callable[[dict[str, Any]], bool]) -> str | None:
        return next((m["id"] for m in visible if pick(m)), None)

    fast = (first(lambda m: bool(_FAST_ID.search(f"{m['id']} {m.get('displayName', '')}")))
            or first(lambda m: m["id"] != default and bool(_FAST_TEXT.search(m.get("description") or "")))
            or default)
    most_efforts = max(visible, key=lambda m: len(m.get("supportedReasoningEfforts") or []), default=None)
    deep = (first(lambda m: bool(_DEEP_TEXT.search(m.get("description") or "")))
            or first(lambda m: bool(_DEEP_ID.search(m["id"])))
            or (most_efforts["id"] if most_efforts else None)
            or default)
    return {"models": [{"id": m["id"], "displayName": m.get("displayName") or m["id"],
                        "isDefault": m["id"] == default} for m in visible],
            "defaultModel": default, "fastModel": fast, "deepModel": deep}




class DiscoveryCache:
    """``state_dir/discovery.json``: the last good discovery, its time and codex version."""

    def __init__(self, state_dir: Path, ttl_ms: int, *, clock: Callable[[], float] = time.time,
                 cwds: list[Path] | None = None) -> None:
        self.path = state_dir / CACHE_FILE
        self.cwds = cwds
        self.ttl_ms = ttl_ms
        self._clock = clock

    def load(self) -> dict[str, Any] | None:
        try:
            document = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(document, dict) or not isinstance(document.get("metadata"), dict):
            return None
        return document

    def age_ms(self, document: dict[str, Any]) -> int:
        saved = document.get("savedAtMs")
        return int(self._clock() * 1000 - saved) if isinstance(saved, int | float) else 2**62

    def fresh(self, document: dict[str, Any], version: str | None) -> bool:
        same_codex = version is None or document.get("codexVersion") == version
        return same_codex and self.age_ms(document) < self.ttl_ms

    async def get(self, app: AppServer, *, refresh: bool = False) -> dict[str, Any]:
        """Fresh-or-cached; a failure warns, keeps the last good data, sets ``metadata.error``."""
        cached = self.load()
        version = app.status.get("version")
        if cached is not None and not refresh and self.fresh(cached, version):
            return cached
        try:
            async with asyncio.timeout(DISCOVERY_TIMEOUT_S):
                client = await app.client()
                version = app.status.get("version")
                metadata = await discover(client, version or "unknown", cwds=self.cwds)
        except TimeoutError:
            return self._failed(cached, AppServerError("capability discovery timed out"))
        except AppServerError as exc:
            return self._failed(cached, exc)
        document = {"metadata": metadata, "discoveredAt": metadata["discoveredAt"],
                    "codexVersion": version, "savedAtMs": int(self._clock() * 1000)}
        self._save(document)
        return document

    def _failed(self, cached: dict[str, Any] | None, exc: Exception) -> dict[str, Any]:
        error = sanitize_text(str(exc) or type(exc).__name__, limit=ERROR_CHARS)
        logger.warning("capability discovery failed (%s); keeping the last good data", error)
        document = dict(cached) if cached else {"metadata": {}, "discoveredAt": None}
        document["metadata"] = {**document["metadata"], "error": error}
        return document

    def _save(self, document: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(".tmp")
        temporary.unlink(missing_ok=True)
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(document, handle, separators=(",", ":"))
        os.replace(temporary, self.path)  # atomic: a reader never sees half a file


def load_cached(state_dir: Path) -> dict[str, Any] | None:
    """For the CLI: the cached discovery plus its age (``ageMs``), or None."""
    cache = DiscoveryCache(state_dir, ttl_ms=0)
    document = cache.load()
    if document is not None:
        document["ageMs"] = cache.age_ms(document)
    return document
