"""Rendering the systemd unit and the launchd plist from the packaged templates.

Pure functions of a ``ServiceSpec``: no file system or process access beyond
reading the templates, so tests check the output byte for byte. The templates live
in ``boss_agent/service/templates/`` (shipped in the wheel); the copies at the
repository root (``systemd/``, ``launchd/``) are these templates rendered with
example values (``render_examples``), for people who install by hand.

Escaping is done here, once: systemd expands ``%`` specifiers everywhere and
``$`` variables in ``ExecStart=``, so user paths are quoted and escaped before they
reach the template; plist values go through ``plistlib``, which escapes XML.
"""

from __future__ import annotations

import plistlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

UNIT_NAME = "boss-agent.service"
LAUNCHD_LABEL = "com.boss.agent"
PLIST_NAME = f"{LAUNCHD_LABEL}.plist"

WATCHDOG_SEC = 60  # the daemon pings every 30 s; a loaded 2-core laptop still makes that
STOP_MARGIN_S = 30  # beyond the grace period: reporting the interrupted tasks takes time too

_SYSTEM_HARDENING = (
    "ProtectSystem=full",  # /usr, /boot, /etc read-only; home and workspaces stay writable
    "ProtectKernelTunables=yes",
    "ProtectKernelModules=yes",
    "ProtectControlGroups=yes",
)


@dataclass(frozen=True)
class ServiceSpec:
    """Everything the templates need; paths are absolute."""

    argv: tuple[str, ...]  # program and its arguments, e.g. (boss-agent, "run")
    environment: Mapping[str, str] = field(default_factory=dict)
    grace_period_s: int = 30
    log_dir: Path = Path("/var/empty")
    home: Path = Path("/var/empty")
    system: bool = False
    user: str | None = None  # the account a system unit / LaunchDaemon runs as

    @property
    def stop_timeout_s(self) -> int:
        return self.grace_period_s + STOP_MARGIN_S


_LONE_PLACEHOLDER = re.compile(r"\$\{\w+\}")


def _template(name: str) -> str:
    return resources.files("boss_agent.service").joinpath("templates", name).read_text("utf-8")


def systemd_quote(value: str, *, exec_line: bool = False) -> str:
    """One word for a unit file: C-escaped, ``%`` doubled, quoted when needed."""
    if "\n" in value or "\r" in value:
        raise ValueError("a line break cannot be written into a unit file")
    text = value.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    if exec_line:
        text = text.replace("$", "$$")  # ExecStart= expands $VAR; we mean a literal $
    if any(ch in text for ch in ' \t"\'\\;') or not text:
        return f'"{text}"'
    return text


def _environment_lines(environment: Mapping[str, str]) -> str:
    return "\n".join(
        f"Environment={systemd_quote(f'{name}={value}')}" for name, value in environment.items()
    )


def render_systemd_unit(spec: ServiceSpec) -> str:
    """The unit text: user unit (``default.target``) or system unit (``User=``)."""
    system_lines = f"User={systemd_quote(spec.user)}" if spec.system and spec.user else ""
    values = {
        "exec_start": " ".join(systemd_quote(arg, exec_line=True) for arg in spec.argv),
        "environment": _environment_lines(spec.environment),
        "watchdog_sec": str(WATCHDOG_SEC),
        "grace_period_s": str(spec.grace_period_s),
        "timeout_stop_sec": str(spec.stop_timeout_s),
        "system_lines": system_lines,
        "system_hardening": "\n".join(_SYSTEM_HARDENING) if spec.system else "",
        "wanted_by": "multi-user.target" if spec.system else "default.target",
    }
    # A placeholder alone on its line with nothing to put there leaves no blank line.
    lines = [
        line for line in _template(UNIT_NAME).splitlines()
        if not (_LONE_PLACEHOLDER.fullmatch(line) and not values[line[2:-1]])
    ]
    return Template("\n".join(lines) + "\n").substitute(values)


def _substitute(node: Any, values: Mapping[str, str]) -> Any:
    if isinstance(node, str):
        return Template(node).substitute(values)
    if isinstance(node, dict):
        return {key: _substitute(value, values) for key, value in node.items()}
    if isinstance(node, list):
        return [_substitute(item, values) for item in node]
    return node


def launchd_plist(spec: ServiceSpec) -> dict[str, Any]:
    """The plist as a dict: the template's fixed keys plus this install's values."""
    template = plistlib.loads(_template(PLIST_NAME).encode("utf-8"))
    values = {
        "label": LAUNCHD_LABEL,
        "program_arguments": "${program_arguments}",  # replaced below by the whole list
        "path": spec.environment.get("PATH", "/usr/bin:/bin:/usr/sbin:/sbin"),
        "home": str(spec.home),
        "log_dir": str(spec.log_dir),
    }
    plist: dict[str, Any] = _substitute(template, values)
    plist["ProgramArguments"] = list(spec.argv)
    plist["EnvironmentVariables"].update(spec.environment)
    # launchd SIGKILLs 20 s after SIGTERM by default: longer than our grace period.
    plist["ExitTimeOut"] = spec.stop_timeout_s
    if spec.system and spec.user:
        plist["UserName"] = spec.user
    return plist


def render_launchd_plist(spec: ServiceSpec) -> str:
    return plistlib.dumps(launchd_plist(spec), sort_keys=False).decode("utf-8")


EXAMPLE_SPEC = ServiceSpec(
    argv=("/usr/local/bin/boss-agent", "run"),
    environment={"PATH": "/usr/local/bin:/usr/bin:/bin"},
    grace_period_s=30,
    log_dir=Path("/Users/you/Library/Application Support/boss-agent/logs"),
    home=Path("/Users/you"),
)


def render_examples() -> dict[str, str]:
    """Repository-relative path -> content of the hand-install examples."""
    return {
        f"systemd/{UNIT_NAME}": render_systemd_unit(EXAMPLE_SPEC),
        f"launchd/{PLIST_NAME}": render_launchd_plist(EXAMPLE_SPEC),
    }
