"""`boss-agent capabilities`: what the local codex offers, as the phone sees it.

By default this only reads the discovery cache the daemon keeps
(``state_dir/discovery.json``, see ``appserver.discovery``) and says how old it is;
``--refresh`` starts the app-server, runs discovery now and saves the result, the
same way the daemon's refresh loop does.
"""

from __future__ import annotations

from typing import Any

from boss_agent.appserver.discovery import DiscoveryCache, load_cached
from boss_agent.config import Config
from boss_agent.errors import AppServerError
from boss_agent.identity import ensure_state_dir
from boss_agent.cli.status import clean

_KEYS = ("models", "defaultModel", "fastModel", "deepModel", "providerCapabilities",
         "skills", "plugins", "apps")


def view(document: dict[str, Any] | None) -> dict[str, Any]:
    """The cache document as the command shows it: metadata, codex version, age."""
    if document is None:
        return {"discovered": False}
    metadata = document.get("metadata") or {}
    shown: dict[str, Any] = {"discovered": bool(metadata.get("models") is not None),
                             "codexVersion": document.get("codexVersion"),
                             "discoveredAt": document.get("discoveredAt"),
                             "ageS": round(document["ageMs"] / 1000, 1) if "ageMs" in document else None}
    shown.update({key: metadata.get(key) for key in _KEYS})
    if metadata.get("error"):
        shown["error"] = metadata["error"]
    cleaned: dict[str, Any] = clean(shown)
    return cleaned


def cached_capabilities(config: Config) -> dict[str, Any]:
    return view(load_cached(config.state_dir))


async def refresh_capabilities(config: Config) -> dict[str, Any]:
    """Run discovery now on a started app-server and save it; raise when it failed."""
    from boss_agent.appserver.client import AppServer

    ensure_state_dir(config.state_dir)  # owner-only, as the daemon creates it
    cache = DiscoveryCache(config.state_dir, config.codex.app_server_discovery_ttl_ms)
    async with AppServer.from_config(config) as app:
        document = await cache.get(app, refresh=True)
    error = (document.get("metadata") or {}).get("error")
    if error:
        raise AppServerError(f"capability discovery failed: {error}")
    return cached_capabilities(config)


def render(data: dict[str, Any], echo: Any) -> None:
    """Human-readable lines through ``echo``."""
    if not data.get("discovered"):
        echo("no capability discovery yet: run `boss-agent capabilities --refresh` or start the daemon")
        return
    echo(f"codex {data.get('codexVersion')}, discovered {data.get('ageS')} s ago")
    models = data.get("models") or []
    echo(f"models ({len(models)}): " + (", ".join(m.get("id", "?") for m in models) or "-"))
    for role in ("defaultModel", "fastModel", "deepModel"):
        echo(f"  {role.removesuffix('Model')}: {data.get(role) or '-'}")
    for key in ("skills", "plugins", "apps"):
        names = [entry.get("name", "?") for entry in data.get(key) or []]
        echo(f"{key} ({len(names)}): " + (", ".join(names) or "-"))
    provider = data.get("providerCapabilities") or {}
    echo("provider: " + (", ".join(f"{k}={v}" for k, v in sorted(provider.items())) or "-"))
    if data.get("error"):
        echo(f"last error: {data['error']}")
