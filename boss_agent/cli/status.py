"""`boss-agent status`: what a user needs to know, read from files, no daemon round trip.

Everything comes from the config and the small files the daemon keeps in its state
dir (``device.json``, ``state.json``, ``discovery.json``, the report spool), so status
works whether or not the daemon runs and never blocks on the network. The daemon's
liveness comes from its lock (``statefile.status_snapshot``), not from the file, so
a crashed daemon shows as not running.

``codex --version`` runs only when no state file names the version: it costs a
node start, and status must be fast.

Redaction: the token is never read into the result (only ``Identity`` fields that
are public), and every string passes ``mask_secrets`` and ``relativize_paths``, so
neither a credential in a URL nor the user's home path is printed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from boss_agent.appserver.discovery import load_cached
from boss_agent.codexbin import codex_version, find_codex
from boss_agent.config import Config
from boss_agent.errors import AppServerError, StateError
from boss_agent.identity import LOCAL_ID_FILE, TOKEN_FILE, Identity, load_identity
from boss_agent.redact import mask_secrets, relativize_paths
from boss_agent.sources.boss.spool import RUNNING_DIR, SPOOL_DIR
from boss_agent.daemon.statefile import STATE_FILE, read_state, status_snapshot


def clean(value: Any) -> Any:
    """Mask secrets and home paths in every string of ``value`` (recursively)."""
    if isinstance(value, str):
        return relativize_paths(mask_secrets(value))
    if isinstance(value, list | tuple):
        return [clean(v) for v in value]
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    return value


def count_records(state_dir: Path, name: str) -> int:
    """How many ``<taskId>.json`` records a spool-like directory holds (0 when absent)."""
    try:
        return sum(1 for _ in (state_dir / name).glob("*.json"))
    except OSError:
        return 0


def codex_facts(config: Config, known_version: str | None) -> dict[str, Any]:
    facts: dict[str, Any] = {"codexVersion": known_version,
                             "codexTransport": config.codex.app_server_transport}
    if known_version:
        return facts
    try:
        facts["codexVersion"] = codex_version(find_codex(config.codex.bin))
    except AppServerError as exc:
        facts["codexError"] = str(exc)
    return facts


def _identity(state_dir: Path) -> tuple[Identity | None, str | None]:
    try:
        return load_identity(state_dir), None
    except StateError as exc:
        return None, str(exc)


def _revoked(identity: Identity | None, state: dict[str, Any], state_dir: Path) -> bool:
    """The daemon saw a 401 for *this* pairing (a later `pair` makes the flag stale)."""
    if identity is None or not state.get("unpaired") or state.get("device_id") != identity.device_id:
        return False
    try:
        token_mtime = (state_dir / TOKEN_FILE).stat().st_mtime
        written = (state_dir / STATE_FILE).stat().st_mtime
    except OSError:
        return True
    return token_mtime <= written


def gateway_status(config: Config, state: dict[str, Any], running: bool) -> dict[str, Any]:
    """The gateway as the daemon last wrote it (live values only while it runs)."""
    data: dict[str, Any] = {
        "redisUrl": config.gateway.redis_url, "agentTypes": list(config.gateway.agent_types),
        "group": config.gateway.consumer_group, "gatewayOnly": not config.server_url,
        "projects": sorted(config.projects),
    }
    if running and state.get("gateway_worker_id"):
        data.update({
            "workerId": state["gateway_worker_id"], "redisReachable": state.get("gateway_connected"),
            "leaseTtlS": state.get("gateway_lease_ttl_s"), "pending": state.get("gateway_pending"),
            "poison": state.get("gateway_poison"), "forwarded": state.get("gateway_forwarded"),
            "threads": state.get("gateway_threads"),
            "resumeDropped": state.get("gateway_resume_dropped"),
        })
    return data


def _local_device_id(state_dir: Path) -> str | None:
    try:
        return (state_dir / LOCAL_ID_FILE).read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def daemon_health(state: dict[str, Any]) -> dict[str, Any]:
    """What the running daemon counts about trouble from outside (a full disk)."""
    health: dict[str, Any] = {}
    if state.get("spool_degraded"):
        health["spool"] = "degraded: the disk refuses writes; results wait in memory"
    if state.get("spool_refused"):
        health["spoolRefused"] = state["spool_refused"]
    return health


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def collect_status(config: Config) -> dict[str, Any]:
    """The status dict (camelCase keys) that ``status --json`` prints."""
    state_dir = config.state_dir
    identity, identity_error = _identity(state_dir)
    state = read_state(state_dir) or {}
    snap = status_snapshot(state_dir)
    revoked = _revoked(identity, state, state_dir)
    discovery = load_cached(state_dir)
    data: dict[str, Any] = {
        "paired": identity is not None and not revoked,
        "unpaired": revoked,
        "server": identity.server_url if identity else config.server_url,
        "deviceId": identity.device_id if identity else _local_device_id(state_dir),
        "stateDir": str(state_dir),
        "daemonRunning": snap["running"],
        "daemonPid": snap["daemon_pid"],
        "daemonState": snap["state"],
        "uptimeS": _round(snap["uptime_s"]) if snap["running"] else None,
        "discoveryAgeS": _round(discovery["ageMs"] / 1000) if discovery else None,
        "runningTasks": len(snap["running_task_ids"] or []),
        "runningTaskIds": snap["running_task_ids"] or [],
        "spooledReports": count_records(state_dir, SPOOL_DIR),
        "lastHeartbeatAt": state.get("last_heartbeat_at"),
        "lastHeartbeatAgeS": _round(snap["last_heartbeat_age_s"]),
        "lastHeartbeatResult": state.get("last_heartbeat_result"),
    }
    if snap["running"]:
        data.update(daemon_health(state))
    else:
        # Tasks a dead daemon left in its journal; the next start reports them failed.
        data["unfinishedTasks"] = count_records(state_dir, RUNNING_DIR)
    if identity_error:
        data["identityError"] = identity_error
    if config.gateway.enabled:
        data["gateway"] = gateway_status(config, state, snap["running"])
    data.update(codex_facts(config, state.get("codex_version")))
    if snap["running"] and state.get("codex_transport"):
        data["codexTransport"] = state["codex_transport"]  # the live one (after a fallback)
    cleaned: dict[str, Any] = clean(data)
    return cleaned
