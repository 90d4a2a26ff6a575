"""`boss-agent doctor`: each check says ok / warn / fail and, when not ok, a one-line fix.

The checks, in order: the config parses; the codex binary is found, inside the
supported range (codexversion.py), with its feature set; the app-server initializes on the configured transport, auth
included, and answers a cheap request; capability discovery runs; the server is
reachable and accepts the device token; the state dir and token file are owner-only;
Redis answers PING when the gateway is on; the desktop (computer use: the CUA
driver is installed and healthy on a reachable display, and an installed service
knows that display); the service is installed.

Each check is a small function that returns one ``Check``. Checks never raise: a
check that crashes is itself a failed check (``_safely``), and every network check
has its own bound, so doctor always finishes. Doctor changes nothing: its app-server
runs in a scratch state dir, and the server check claims zero tasks.
"""

from __future__ import annotations

import asyncio
import os
import stat
import sys
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from boss_agent.cli.support import tilde
from boss_agent.codexbin import INSTALL_HINT, codex_version, find_codex
from boss_agent.codexfeatures import describe_features, detect
from boss_agent.codexversion import Support, range_text, support
from boss_agent.config import Config, load_config
from boss_agent.errors import (
    BossAgentError,
    BossApiError,
    BossUnreachable,
    ServiceError,
    Unauthorized,
)
from boss_agent.daemon.statefile import read_state
from boss_agent.identity import LOCAL_ID_FILE, TOKEN_FILE, load_identity
from boss_agent.sources.gateway.probe import describe, probe_worker
from boss_agent.netaddr import REDIS_ACL, REDIS_INSECURE, REDIS_LOOPBACK, REDIS_TLS, redis_security, redis_url_shown
from boss_agent.redact import mask_secrets

Check = dict[str, Any]

# Bound for one request to a running app-server; its own start is bounded by
# appserver.client.STARTUP_TIMEOUT_S.
APP_SERVER_REQUEST_S = 20.0
SERVER_TIMEOUT_S = 15.0  # a reachable control plane answers a zero-slot claim in milliseconds
REDIS_TIMEOUT_S = 3.0  # PING on a reachable Redis is sub-millisecond; don't make doctor hang
CRASH_CHARS = 160  # a crashed check's message is one short line
PAIR_FIX = "boss-agent pair CODE --server URL (or boss-agent up for the local control plane)"


def _check(name: str, result: str, detail: str, fix: str = "") -> Check:
    return {"name": name, "result": result, "detail": mask_secrets(tilde(detail)), "fix": tilde(fix)}


# ----------------------------------------------------------------- local checks


def check_daemon(config: Config) -> Check:
    """What the running daemon reports about trouble from outside: no pairing, a full disk."""
    from boss_agent.daemon.statefile import read_state, status_snapshot

    snap = status_snapshot(config.state_dir)
    if not snap["running"]:
        return _check("daemon", "ok", "not running")
    state = read_state(config.state_dir) or {}
    if state.get("state") == "waiting for pairing":
        return _check("daemon", "warn", "waiting for pairing", PAIR_FIX)
    if state.get("spool_degraded"):
        return _check("daemon", "warn", "spool degraded: the disk refuses writes, results wait "
                      "in memory", f"free disk space under {config.state_dir}")
    return _check("daemon", "ok", f"running (pid {snap['daemon_pid']})")


def check_codex(config: Config) -> Check:
    try:
        path = find_codex(config.codex.bin)
        version = codex_version(path)
    except BossAgentError as exc:
        return _check("codex", "fail", str(exc), f"{INSTALL_HINT}, or set codex.bin")
    upgrade = INSTALL_HINT
    verdict = support(version)
    if verdict is Support.BELOW:
        return _check("codex", "fail", f"codex {version} is older than supported ({range_text()})", upgrade)
    try:
        features = detect(path, config.state_dir, save=False)  # doctor writes nothing
    except BossAgentError as exc:
        return _check("codex", "warn", f"codex {version}: its features could not be read ({exc})", upgrade)
    detail = f"codex {version} ({describe_features(features)})"
    if verdict is Support.ABOVE:
        return _check("codex", "warn", f"{detail}; newer than tested ({range_text()})",
                      f"if something fails, {upgrade}")
    return _check("codex", "ok", detail)


def check_state_dir(config: Config) -> Check:
    path = config.state_dir
    if not path.exists():
        return _check("state dir", "warn", "not created yet", "it is created on first `run` or `pair`")
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        return _check("state dir", "fail", f"permissions {mode:o} let others read it", f"chmod 700 {path}")
    if not os.access(path, os.W_OK):
        return _check("state dir", "fail", "not writable", f"check the owner of {path}")
    token = path / TOKEN_FILE
    if token.exists():
        token_mode = stat.S_IMODE(token.stat().st_mode)
        if token_mode & 0o077:
            return _check("state dir", "fail", f"the token file has permissions {token_mode:o}",
                          f"chmod 600 {token}")
        return _check("state dir", "ok", f"permissions {mode:o}, token file {token_mode:o}")
    return _check("state dir", "ok", f"permissions {mode:o}")


def check_service(config: Config) -> Check:
    from boss_agent.service.manager import service_status

    try:
        status = service_status(config)
    except ServiceError as exc:
        return _check("service", "warn", str(exc), "run `boss-agent run` under your own supervisor")
    if not status["installed"]:
        return _check("service", "warn", "not installed", "boss-agent service install")
    return _check("service", "ok", f"{status['manager']} ({status['scope']}): "
                                   f"{status.get('enabled')}, {status.get('active')}")


def check_phones(config: Config) -> Check:
    """How phones reach the page: listeners and their certificate's fingerprint, proxies."""
    from boss_agent.cli.task_follow import controlplane_dir
    from boss_agent.controlplane import tls

    local = config.local
    doors = [f"https://{entry.removeprefix('https://')}" for entry in local.listen] + list(local.public_origins)
    if not doors:
        return _check("phones", "ok", "loopback only (no local.listen, no local.public_origins)")
    detail = ", ".join(doors)
    if local.listen:
        cert = local.tls_cert or tls.default_paths(controlplane_dir(config.state_dir))[0]
        if not cert.exists():
            if local.tls_cert:
                return _check("phones", "fail", f"{detail}: no certificate at {cert}", "fix local.tls_cert")
            return _check("phones", "ok", f"{detail}; the certificate is made at the first `boss-agent up`")
        try:
            detail += f"; certificate {tls.fingerprint(cert)}"
        except ValueError:
            return _check("phones", "fail", f"{detail}: {cert} is not a PEM certificate", "fix local.tls_cert")
    return _check("phones", "ok", detail)


# ----------------------------------------------------------------- network checks


async def check_app_server(config: Config) -> list[Check]:
    """Start the app-server as the daemon would; one cheap request; one discovery."""
    from boss_agent.appserver.client import AppServer
    from boss_agent.appserver.discovery import discover

    transport = config.codex.app_server_transport
    with tempfile.TemporaryDirectory(prefix="boss-doctor-") as scratch:
        async with AppServer.from_config(replace(config, state_dir=Path(scratch))) as app:
            try:
                async with asyncio.timeout(APP_SERVER_REQUEST_S):
                    client = await app.client()
                    account = await client.call("account/read", {})
            except (BossAgentError, TimeoutError) as exc:
                failed = _check("app-server", "fail", f"{transport}: {_why(exc)}",
                                "boss-agent --debug capabilities --refresh shows the details")
                return [failed, _check("discovery", "fail", "not tried: no app-server",
                                       "fix the app-server check first")]
            status = app.status
            first = _app_server_check(transport, status, account)
            try:
                async with asyncio.timeout(APP_SERVER_REQUEST_S):
                    metadata = await discover(client, status.get("version") or "unknown")
            except (BossAgentError, TimeoutError) as exc:
                return [first, _check("discovery", "fail", _why(exc), "boss-agent --debug capabilities "
                                      "--refresh shows the error")]
    return [first, _discovery_check(metadata)]


def _app_server_check(transport: str, status: dict[str, Any], account: dict[str, Any]) -> Check:
    if status.get("fallbackFrom"):
        return _check("app-server", "fail",
                      f"{transport} failed ({status.get('error')}); the daemon would fall back to stdio",
                      "check codex.app_server_url and its auth token/secret files")
    detail = f"initialized over {status.get('transport')}"
    if account.get("requiresOpenaiAuth") and not account.get("account"):
        return _check("app-server", "warn", detail + ", but codex is not logged in", "codex login")
    return _check("app-server", "ok", detail)


def _discovery_check(metadata: dict[str, Any]) -> Check:
    counts = {key: len(metadata.get(key) or []) for key in ("models", "skills", "plugins", "apps")}
    detail = ", ".join(f"{n} {key}" for key, n in counts.items())
    if not counts["models"]:
        return _check("discovery", "warn", detail, "codex login, or check the model provider in codex's config")
    return _check("discovery", "ok", f"{detail}; default model {metadata.get('defaultModel')}")


async def check_server(config: Config) -> Check:
    """An authenticated call that changes nothing: a claim of zero slots, no waiting."""
    from boss_agent.sources.boss.api import BossApi
    from boss_agent.sources.boss.retry import BossApiRetry

    try:
        identity = load_identity(config.state_dir)
    except BossAgentError as exc:
        return _check("server", "fail", str(exc), PAIR_FIX)
    if identity is None:
        if config.gateway.enabled and not config.server_url:
            return _check("server", "ok", "gateway-only device: no Boss server needed")
        return _check("server", "warn", "not paired", PAIR_FIX)
    body = {"deviceId": identity.device_id, "slots": 0, "waitMs": 0}
    once = BossApiRetry(give_up_after_s=0.0)  # doctor reports the first answer; no retries
    try:
        async with BossApi(identity.server_url, device_id=identity.device_id, token=identity.token,
                           policy=once) as api, asyncio.timeout(SERVER_TIMEOUT_S):
            await api.call("POST", "/api/v1/master-agent/tasks/claim", body)
    except Unauthorized:
        return _check("server", "fail", f"{identity.server_url} rejected the device token",
                      f"token revoked, pair again: {PAIR_FIX}")
    except (BossUnreachable, TimeoutError) as exc:
        return _check("server", "fail", f"{identity.server_url} is unreachable ({_why(exc)})",
                      "check server.url and the network; is the control plane running?")
    except BossApiError as exc:
        return _check("server", "warn", f"{identity.server_url} answered {exc}",
                      "check that the server speaks the Boss device API v1")
    return _check("server", "ok", f"{identity.server_url}, token accepted")


async def check_redis(config: Config) -> Check:
    if not config.gateway.enabled:
        return _check("redis", "ok", "gateway off; not needed")
    from boss_agent.errors import RedisFailure
    from boss_agent.sources.gateway.connect import redis_client

    gw = config.gateway
    shown = redis_url_shown(gw.redis_url)
    client = redis_client(gw, socket_connect_timeout=REDIS_TIMEOUT_S, socket_timeout=REDIS_TIMEOUT_S)
    try:
        async with asyncio.timeout(REDIS_TIMEOUT_S * 2):
            facts = await probe_worker(client, _worker_id(config), gw.agent_types, gw.consumer_group)
    except (RedisFailure, TimeoutError) as exc:  # the client maps every Redis error to RedisFailure
        return _check("redis", "fail", f"{shown} ({_redis_security(gw.redis_url)}): {_why(exc)}",
                      "start Redis, or fix gateway.redis_url, or set gateway.enabled = false")
    finally:
        await client.aclose()
    detail = describe(facts, gw.consumer_group)
    state = read_state(config.state_dir) or {}
    if facts["lease"] and state.get("gateway_poison") is not None:
        detail += f"; {state['gateway_poison']} poison entries dropped since start"
    security = _redis_security(gw.redis_url)
    if redis_security(gw.redis_url) == REDIS_INSECURE:
        return _check("redis", "warn", f"{shown} ({security}) answers PING; {detail}",
                      "use rediss:// or an ACL user and password, then drop gateway.allow_insecure_redis")
    return _check("redis", "ok", f"{shown} ({security}) answers PING; {detail}")


_REDIS_SECURITY = {REDIS_TLS: "TLS", REDIS_ACL: "ACL user, no TLS", REDIS_LOOPBACK: "loopback",
                   REDIS_INSECURE: "insecure: no TLS, no ACL user, not loopback"}


def _redis_security(url: str) -> str:
    return _REDIS_SECURITY[redis_security(url)]


def _worker_id(config: Config) -> str:
    """The gateway worker id the daemon uses (without creating a local device id)."""
    from boss_agent.daemon.runtime import gateway_worker_id

    if config.gateway.worker_id:
        return config.gateway.worker_id
    try:
        identity = load_identity(config.state_dir)
    except BossAgentError:
        identity = None
    if identity is not None:
        return gateway_worker_id(identity.device_id)
    try:
        local = (config.state_dir / LOCAL_ID_FILE).read_text(encoding="utf-8").strip()
    except OSError:
        local = ""
    return gateway_worker_id(local or "unknown")


# ----------------------------------------------------------------- running them


def _why(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return (text or exc.__class__.__name__)[:CRASH_CHARS]


def _crashed(name: str, exc: BaseException) -> Check:
    return _check(name, "fail", f"check crashed: {exc.__class__.__name__}: {_why(exc)}",
                  "run with --debug and report it")


def _safely(name: str, check: Callable[[], Check]) -> Check:
    try:
        return check()
    except Exception as exc:  # noqa: BLE001 - a broken check is reported, never a traceback
        return _crashed(name, exc)


async def _safely_async(names: list[str], check: Callable[[], Awaitable[Any]]) -> list[Check]:
    try:
        result = await check()
    except Exception as exc:  # noqa: BLE001 - same rule for the network checks
        return [_crashed(name, exc) for name in names]
    return result if isinstance(result, list) else [result]


DESKTOP_FIX = "run it from your desktop session (and `boss-agent service install` from there)"


def _installed_unit_lacks_display() -> bool:
    """An installed Linux user unit without the display variables cannot reach the desktop."""
    from boss_agent.service.manager import Host, service_file
    from boss_agent.service.plan import DESKTOP_ENV

    if not sys.platform.startswith("linux"):
        return False
    unit = service_file(Host.current(), system=False)
    if not unit.is_file():
        return False
    text = unit.read_text(encoding="utf-8", errors="replace")
    return not any(f"{name}=" in text for name in DESKTOP_ENV if name != "XAUTHORITY")


async def check_desktop(config: Config) -> Check:
    """Computer use: the CUA driver installed, a display reachable, the driver healthy on it."""
    from boss_agent.runner import cua

    binary = cua.find_driver(config.cua_bin)
    if binary is None:
        return _check("desktop", "warn", "cua-driver is not installed; computer use only through Codex's own",
                      "pip install 'boss-agent[cua]' (scripts/up.sh installs it)")
    display = os.environ.get("WAYLAND_DISPLAY") or os.environ.get("DISPLAY")
    if not display:
        return _check("desktop", "warn", "no display: DISPLAY and WAYLAND_DISPLAY are unset", DESKTOP_FIX)
    health = await cua.driver_health(binary)
    if not health.available:
        return _check("desktop", "warn", f"cua-driver on {display}: {health.reason}", DESKTOP_FIX)
    if _installed_unit_lacks_display():
        return _check("desktop", "warn", f"cua-driver {health.version} healthy on {display}, but the "
                      "installed service has no display variables", "boss-agent service install "
                      "(again, from your desktop session)")
    return _check("desktop", "ok", f"cua-driver {health.version} healthy on display {display}")


async def _network_checks(config: Config, codex_ok: bool) -> list[Check]:
    results: list[Check] = []
    if codex_ok:
        results += await _safely_async(["app-server", "discovery"], lambda: check_app_server(config))
    else:
        fix = "fix the codex check first"
        results += [_check("app-server", "fail", "not tried: no usable codex", fix),
                    _check("discovery", "fail", "not tried: no usable codex", fix)]
    results += await _safely_async(["server"], lambda: check_server(config))
    results += await _safely_async(["redis"], lambda: check_redis(config))
    results += await _safely_async(["desktop"], lambda: check_desktop(config))
    return results


def run_checks(config_path: str | Path | None) -> list[Check]:
    """Every check, in order; never raises."""
    try:
        config = load_config(config_path)
    except BossAgentError as exc:
        return [_check("config", "fail", str(exc), "fix the key named above (see config.example.toml)")]
    results = [_check("config", "ok", str(config.config_path or "defaults (no config file)"))]
    codex = _safely("codex", lambda: check_codex(config))
    results.append(codex)
    results += asyncio.run(_network_checks(config, codex["result"] != "fail"))
    results.append(_safely("state dir", lambda: check_state_dir(config)))
    results.append(_safely("daemon", lambda: check_daemon(config)))
    results.append(_safely("service", lambda: check_service(config)))
    results.append(_safely("phones", lambda: check_phones(config)))
    return results
