"""Settings: one TOML file, ``BOSS_*`` environment overrides, command-line overrides.

Precedence, lowest first: built-in defaults, the TOML file, the environment, the
command line. Everything is validated once, here; the rest of the daemon reads a
frozen ``Config`` and never parses a string again. A bad value raises
``ConfigError`` naming the key and where it came from (the CLI turns it into one
line and exit code 2).

The table ``KEYS`` is the single list of keys: the loader, ``config.example.toml``
(checked by a test) and the docs all follow it. The one exception is the
``[projects]`` table (project id -> path), whose keys are the owner's own names.
"""

from __future__ import annotations

import logging
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import platformdirs

from boss_agent.codexbin import installed_codex
from boss_agent.errors import ConfigError
from boss_agent.ids import ID_RULE, valid_id
from boss_agent.netaddr import address_is_loopback, check_redis_url, check_server_url, parse_listen, public_origin

logger = logging.getLogger(__name__)

APP_NAME = "boss-agent"
CONFIG_ENV = "BOSS_AGENT_CONFIG"

TRANSPORTS = ("stdio", "ws", "unix")
APPROVAL_POLICIES = ("untrusted", "on-request", "never")  # strictest first
SANDBOXES = ("read-only", "workspace-write", "danger-full-access")  # strictest first
APPROVAL_MODES = ("remote", "deny")
FALLBACKS = ("exec", "cua")
PROJECTS = "projects"  # the [projects] table: project id -> path


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("expected a string")
    return value


def _opt_str(value: Any) -> str | None:
    if value is None or value == "":
        return None
    return _str(value)


def _gateway_id(value: Any) -> str:
    if not valid_id(value):
        raise ValueError(f"expected an id of {ID_RULE}")
    return value


def _opt_gateway_id(value: Any) -> str | None:
    return None if value is None or value == "" else _gateway_id(value)


def _ids(value: Any) -> tuple[str, ...]:
    ids = _list(_gateway_id)(value)
    if not ids:
        raise ValueError("expected at least one agent type")
    return ids


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("1", "true", "yes", "on"):
        return True
    if isinstance(value, str) and value.lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError("expected true or false")


def _int(lo: int, hi: int) -> Callable[[Any], int]:
    def parse(value: Any) -> int:
        if isinstance(value, bool):
            raise ValueError("expected a whole number")
        try:
            number = int(value)
        except (TypeError, ValueError):
            raise ValueError("expected a whole number") from None
        if isinstance(value, float) and value != number:
            raise ValueError("expected a whole number")
        if not lo <= number <= hi:
            raise ValueError(f"must be between {lo} and {hi}")
        return number

    return parse


def _choice(options: tuple[str, ...]) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        if value not in options:
            raise ValueError(f"must be one of {', '.join(options)}")
        return str(value)

    return parse


def _list(item: Callable[[Any], str], sep: str = ",") -> Callable[[Any], tuple[str, ...]]:
    def parse(value: Any) -> tuple[str, ...]:
        if isinstance(value, str):
            value = [part.strip() for part in value.split(sep) if part.strip()]
        if not isinstance(value, list | tuple):
            raise ValueError("expected a list")
        return tuple(item(v) for v in value)

    return parse


def _path(value: Any) -> Path:
    return Path(os.path.expanduser(_str(value)))


def _opt_path(value: Any) -> Path | None:
    return None if value in (None, "") else _path(value)


def _listen(value: Any) -> str:
    parse_listen(_str(value))  # ValueError names the entry
    return _str(value).strip()


def _origin(value: Any) -> str:
    return public_origin(_str(value))


def _paths(value: Any) -> tuple[Path, ...]:
    return tuple(_path(v) for v in _list(_str, os.pathsep)(value))


def _url(schemes: tuple[str, ...]) -> Callable[[Any], str | None]:
    def parse(value: Any) -> str | None:
        text = _opt_str(value)
        if text is None:
            return None
        if not text.startswith(tuple(f"{s}://" for s in schemes)):
            raise ValueError(f"must start with {' or '.join(s + '://' for s in schemes)}")
        return text.rstrip("/") if schemes[0].startswith("http") else text

    return parse


def _loopback_listen(value: Any) -> tuple[str, int] | None:
    """``127.0.0.1:9464`` or ``[::1]:9464``: what a local Prometheus agent scrapes."""
    text = _opt_str(value)
    if text is None:
        return None
    host, sep, port = text.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError("expected ADDRESS:PORT, such as 127.0.0.1:9464")
    if not address_is_loopback(host):
        raise ValueError(f"{host or '(no address)'} is not loopback: metrics are served on this "
                         "machine only (scrape them through a local agent or a tunnel)")
    return host, int(port)


@dataclass(frozen=True)
class Key:
    name: str  # dotted TOML key
    env: str | None
    default: Any
    parse: Callable[[Any], Any]
    doc: str


KEYS: tuple[Key, ...] = (
    Key("server.url", "BOSS_SERVER_URL", None, _url(("http", "https")),
        "Boss control plane base URL (the local control plane with `up`)"),
    Key("server.allow_insecure_http", "BOSS_SERVER_ALLOW_INSECURE_HTTP", False, _bool,
        "allow an http:// server.url that is not loopback (the token travels in clear text)"),
    Key("state_dir", "BOSS_STATE_DIR", None, _opt_path,
        "token, device id, discovery cache, report spool, lock, logs"),
    Key("workspaces", "BOSS_WORKSPACES", None, _paths,
        "roots a task's workdir must lie in (default: your home)"),
    Key("default_workdir", "BOSS_DEFAULT_WORKDIR", None, _opt_path,
        "where a task naming no workdir runs (default: a per-thread scratch dir in the state dir)"),
    Key("max_concurrent_tasks", "BOSS_MAX_CONCURRENT_TASKS", 2, _int(1, 64),
        "tasks run at once"),
    Key("grace_period_s", "BOSS_GRACE_PERIOD_S", 30, _int(0, 3600),
        "on SIGTERM, how long running tasks may finish before they are interrupted"),
    Key("log_level", "BOSS_LOG_LEVEL", "info", _choice(("debug", "info", "warning", "error")),
        "log verbosity"),
    Key("codex.bin", "BOSS_CODEX_BIN", None, _opt_str,
        "the Codex CLI (default: the one scripts/up.sh recorded, else `codex` on PATH)"),
    Key("codex.app_server_transport", "BOSS_CODEX_APP_SERVER_TRANSPORT", "stdio",
        _choice(TRANSPORTS), "stdio, ws or unix"),
    Key("codex.app_server_url", "BOSS_CODEX_APP_SERVER_URL", None, _url(("ws", "wss", "unix")),
        "ws://127.0.0.1:PORT or unix:///path.sock of a running app-server"),
    Key("codex.app_server_auth_token_file", "BOSS_CODEX_APP_SERVER_AUTH_TOKEN_FILE", None,
        _opt_path, "capability token sent as Authorization: Bearer"),
    Key("codex.app_server_auth_shared_secret_file",
        "BOSS_CODEX_APP_SERVER_AUTH_SHARED_SECRET_FILE", None, _opt_path,
        "secret for signed HS256 JWT bearer tokens"),
    Key("codex.app_server_auth_issuer", "BOSS_CODEX_APP_SERVER_AUTH_ISSUER", None, _opt_str,
        "JWT iss claim"),
    Key("codex.app_server_auth_audience", "BOSS_CODEX_APP_SERVER_AUTH_AUDIENCE", None, _opt_str,
        "JWT aud claim"),
    Key("codex.app_server_discovery_ttl_ms", "BOSS_CODEX_APP_SERVER_DISCOVERY_TTL_MS", 600_000,
        _int(0, 7 * 86_400_000), "capability discovery cache lifetime"),
    Key("codex.request_timeout_s", "BOSS_CODEX_REQUEST_TIMEOUT_S", 60, _int(1, 3600),
        "per-request deadline (codex may drop replies when overloaded)"),
    Key("codex.approval_policy", "BOSS_CODEX_APPROVAL_POLICY", "on-request",
        _choice(APPROVAL_POLICIES), "default approval policy for tasks that name none"),
    Key("codex.max_approval_policy", "BOSS_CODEX_MAX_APPROVAL_POLICY", "on-request",
        _choice(APPROVAL_POLICIES), "the most permissive approval policy a task may get"),
    Key("codex.sandbox", "BOSS_CODEX_SANDBOX", "workspace-write", _choice(SANDBOXES),
        "default sandbox for tasks that name none"),
    Key("codex.max_sandbox", "BOSS_CODEX_MAX_SANDBOX", "workspace-write", _choice(SANDBOXES),
        "the most permissive sandbox a remote task may get"),
    Key("codex.approval_modes", "BOSS_CODEX_APPROVAL_MODES", ("remote", "deny"),
        _list(_choice(APPROVAL_MODES)), "approval modes tasks may use"),
    Key("codex.fallback", "BOSS_CODEX_FALLBACK", ("exec", "cua"), _list(_choice(FALLBACKS)),
        "fallbacks after app-server, in order"),
    Key("codex.approval_timeout_s", "BOSS_APPROVAL_TIMEOUT_S", 600, _int(1, 86_400),
        "remote approval wait before declining"),
    Key("codex.thread_ahead", "BOSS_CODEX_THREAD_AHEAD", True, _bool,
        "keep one Codex thread made ahead for the next task in the same folder (its first words come sooner)"),
    Key("gateway.enabled", "BOSS_GATEWAY_ENABLED", False, _bool, "also take tasks from Redis"),
    Key("gateway.redis_url", "BOSS_REDIS_URL", "redis://127.0.0.1:6379/0",
        _url(("redis", "rediss", "unix")),
        "Redis for the gateway: rediss:// or an ACL user and password unless it is loopback"),
    Key("gateway.redis_ca_file", "BOSS_REDIS_CA_FILE", None, _opt_path,
        "CA certificate (PEM) that signed a rediss:// server's certificate (default: the system's)"),
    Key("gateway.allow_insecure_redis", "BOSS_GATEWAY_ALLOW_INSECURE_REDIS", False, _bool,
        "allow a plain redis:// to another machine without an ACL user (anyone on the path can queue tasks)"),
    Key("gateway.agent_types", "BOSS_GATEWAY_AGENT_TYPES", ("boss_local_agent",), _ids,
        "agent-type streams to consume"),
    Key("gateway.worker_id", "BOSS_GATEWAY_WORKER_ID", None, _opt_gateway_id,
        "worker id (default: derived from the device id)"),
    Key("gateway.consumer_group", "BOSS_GATEWAY_CONSUMER_GROUP", "agent_engines", _str,
        "consumer group name"),
    Key("cua.bin", "BOSS_CUA_DRIVER_BIN", None, _opt_str,
        "the cua-driver executable (default: the cua-driver package's)"),
    Key("local.listen", "BOSS_LOCAL_LISTEN", (), _list(_listen),
        "extra https ADDRESS:PORT listeners of the page for phones (a LAN or tailnet address)"),
    Key("local.tls_cert", "BOSS_LOCAL_TLS_CERT", None, _opt_path,
        "certificate of the local.listen listeners (default: a self-signed one made once)"),
    Key("local.tls_key", "BOSS_LOCAL_TLS_KEY", None, _opt_path, "its private key"),
    Key("local.public_origins", "BOSS_LOCAL_PUBLIC_ORIGINS", (), _list(_origin),
        "exact https:// origins of a reverse proxy on this machine that forwards to the page"),
    Key("metrics.listen", "BOSS_METRICS_LISTEN", None, _loopback_listen,
        "loopback ADDRESS:PORT serving Prometheus /metrics and /readyz (default: off)"),
)
KEYS_BY_NAME = {key.name: key for key in KEYS}


@dataclass(frozen=True)
class CodexSettings:
    bin: str | None
    app_server_transport: str
    app_server_url: str | None
    app_server_auth_token_file: Path | None
    app_server_auth_shared_secret_file: Path | None
    app_server_auth_issuer: str | None
    app_server_auth_audience: str | None
    app_server_discovery_ttl_ms: int
    request_timeout_s: int
    approval_policy: str
    max_approval_policy: str
    sandbox: str
    max_sandbox: str
    approval_modes: tuple[str, ...]
    fallback: tuple[str, ...]
    approval_timeout_s: int
    thread_ahead: bool = True


@dataclass(frozen=True)
class GatewaySettings:
    enabled: bool
    redis_url: str
    agent_types: tuple[str, ...]
    worker_id: str | None
    consumer_group: str
    redis_ca_file: Path | None = None
    allow_insecure_redis: bool = False


@dataclass(frozen=True)
class LocalSettings:
    """How phones reach the local control plane's page (docs/phone.md)."""

    listen: tuple[str, ...] = ()
    tls_cert: Path | None = None
    tls_key: Path | None = None
    public_origins: tuple[str, ...] = ()


@dataclass(frozen=True)
class Config:
    server_url: str | None
    state_dir: Path
    workspaces: tuple[Path, ...]
    max_concurrent_tasks: int
    grace_period_s: int
    log_level: str
    codex: CodexSettings
    gateway: GatewaySettings
    cua_bin: str | None
    default_workdir: Path | None = None
    projects: dict[str, Path] = field(default_factory=dict)
    # False when ``workspaces`` is the built-in default (home), which the owner did not list.
    workspaces_listed: bool = True
    allow_insecure_http: bool = False
    local: LocalSettings = field(default_factory=LocalSettings)
    metrics_listen: tuple[str, int] | None = None  # (host, port) of /metrics and /readyz
    config_path: Path | None = None
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)


def config_value(config: Config, name: str) -> Any:
    """The value of the dotted key ``name`` in a loaded config (``codex.sandbox``...)."""
    section, _, key = name.partition(".")
    if not key:
        return getattr(config, section)
    if section == "server":
        return config.allow_insecure_http if key == "allow_insecure_http" else config.server_url
    if section == "cua":
        return config.cua_bin
    if section == "metrics":
        return config.metrics_listen
    return getattr(getattr(config, section), key)


def default_config_path() -> Path:
    return Path(platformdirs.user_config_dir(APP_NAME)) / "config.toml"


def default_state_dir() -> Path:
    return Path(platformdirs.user_state_dir(APP_NAME))


def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for name, value in table.items():
        dotted = f"{prefix}{name}"
        if isinstance(value, dict):
            flat.update(_flatten(value, dotted + "."))
        else:
            flat[dotted] = value
    return flat


_PROJECT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


def _projects(value: Any) -> dict[str, Path]:
    """The ``[projects]`` table: project id -> directory (ids are advertised, paths never)."""
    if not isinstance(value, Mapping):
        raise ValueError("expected a table of project id = path")
    projects: dict[str, Path] = {}
    for project_id, path in value.items():
        if not isinstance(project_id, str) or not _PROJECT_ID.fullmatch(project_id) or ".." in project_id:
            raise ValueError(f"{project_id!r}: ids are letters, digits, '_', '.', '-'")
        if not isinstance(path, str) or not path:
            raise ValueError(f"{project_id}: must be a directory path")
        projects[project_id] = _path(path).resolve()
    return projects


def _read_file(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from exc
    projects = data.pop(PROJECTS, None)
    flat = _flatten(data)
    if projects is not None:
        flat[PROJECTS] = projects
    unknown = sorted(set(flat) - set(KEYS_BY_NAME) - {PROJECTS})
    if unknown:
        raise ConfigError(f"{path}: unknown key {unknown[0]!r}")
    return flat


def load_config(
    path: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Config:
    """Load and validate the configuration; raise ConfigError on any bad value."""
    env = os.environ if environ is None else environ
    explicit = path or env.get(CONFIG_ENV)
    candidate = Path(explicit).expanduser() if explicit else default_config_path()
    if explicit and not candidate.is_file():
        raise ConfigError(f"{candidate}: no such config file")
    raw: dict[str, tuple[Any, str]] = {k.name: (k.default, "default") for k in KEYS}
    raw[PROJECTS] = ({}, "default")
    config_path = candidate if candidate.is_file() else None
    if config_path is not None:
        from_file = _read_file(config_path)
        for name, value in from_file.items():
            raw[name] = (value, str(config_path))
    for key in KEYS:
        if key.env and key.env in env:
            raw[key.name] = (env[key.env], f"environment {key.env}")
    for name, value in (overrides or {}).items():
        if name not in KEYS_BY_NAME and name != PROJECTS:
            raise ConfigError(f"unknown setting {name!r}")
        if value is not None:
            raw[name] = (value, "command line")
    values: dict[str, Any] = {}
    for key in KEYS:
        value, source = raw[key.name]
        try:
            values[key.name] = key.parse(value) if value is not None else None
        except ValueError as exc:
            raise ConfigError(f"{key.name} ({source}): {exc}") from None
    value, source = raw[PROJECTS]
    try:
        values[PROJECTS] = _projects(value)
    except ValueError as exc:
        raise ConfigError(f"{PROJECTS} ({source}): {exc}") from None
    return _build(values, config_path, {name: src for name, (_, src) in raw.items()})


def _build(v: dict[str, Any], config_path: Path | None, sources: dict[str, str]) -> Config:
    codex = CodexSettings(**{k.split(".", 1)[1]: v[k] for k in v if k.startswith("codex.")})
    gateway = GatewaySettings(**{k.split(".", 1)[1]: v[k] for k in v if k.startswith("gateway.")})
    if codex.app_server_url and codex.app_server_transport == "stdio":
        raise ConfigError("codex.app_server_url: set codex.app_server_transport to ws or unix")
    if SANDBOXES.index(codex.sandbox) > SANDBOXES.index(codex.max_sandbox):
        raise ConfigError("codex.sandbox: more permissive than codex.max_sandbox")
    order = APPROVAL_POLICIES
    if order.index(codex.approval_policy) > order.index(codex.max_approval_policy):
        raise ConfigError("codex.approval_policy: more permissive than codex.max_approval_policy")
    local = LocalSettings(**{k.split(".", 1)[1]: v[k] for k in v if k.startswith("local.")})
    if (local.tls_cert is None) != (local.tls_key is None):
        raise ConfigError("local.tls_cert and local.tls_key go together: set both or neither")
    if not v["server.allow_insecure_http"]:
        check_server_url(v["server.url"], False)  # allowed: the daemon warns at its start instead
    if not gateway.allow_insecure_redis:
        check_redis_url(gateway.redis_url, False)  # likewise
    workspaces = v["workspaces"] or (Path.home(),)
    state_dir = v["state_dir"] or default_state_dir()
    if codex.bin is None and (recorded := installed_codex(state_dir)):
        codex = replace(codex, bin=recorded)  # codex.bin, when set, always wins
        sources = {**sources, "codex.bin": "recorded by scripts/up.sh"}
    return Config(
        server_url=v["server.url"],
        state_dir=state_dir,
        workspaces=tuple(p.resolve() for p in workspaces),
        max_concurrent_tasks=v["max_concurrent_tasks"],
        grace_period_s=v["grace_period_s"],
        log_level=v["log_level"],
        codex=codex,
        gateway=gateway,
        cua_bin=v["cua.bin"],
        default_workdir=v["default_workdir"],
        projects=v[PROJECTS],
        workspaces_listed=bool(v["workspaces"]),
        allow_insecure_http=v["server.allow_insecure_http"],
        local=local,
        metrics_listen=v["metrics.listen"],
        config_path=config_path,
        sources=sources,
    )
