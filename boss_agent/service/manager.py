"""The machine side of `service`: where unit files go, and asking the service manager.

``Host`` captures what differs between machines (platform, home, uid, user, the
installing environment) so plans are computed from one value that tests can build.
``service_status`` and ``lingering_enabled`` ask systemd or launchd and never
raise: a manager that cannot answer (no systemd as PID 1, no user bus, no
``launchctl``) is reported as ``unknown``.
"""

from __future__ import annotations

import getpass
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from boss_agent.config import Config
from boss_agent.errors import ServiceError
from boss_agent.service import units
from boss_agent.daemon.statefile import daemon_running

QUERY_TIMEOUT_S = 10  # a read-only systemctl/loginctl/launchctl query; never hang `status`
PLATFORMS = ("linux", "darwin")


@dataclass(frozen=True)
class Host:
    platform: str  # "linux" or "darwin"
    home: Path
    uid: int
    user: str
    environ: Mapping[str, str]

    @classmethod
    def current(cls, platform: str | None = None) -> Host:
        name = platform or ("darwin" if sys.platform == "darwin" else sys.platform)
        if name.startswith("linux"):
            name = "linux"
        if name not in PLATFORMS:
            raise ServiceError(f"service install supports Linux (systemd) and macOS (launchd), not {name}")
        return cls(name, Path.home(), os.getuid(), getpass.getuser(), dict(os.environ))

    def launchd_domain(self, system: bool) -> str:
        return "system" if system else f"gui/{self.uid}"


def service_file(host: Host, *, system: bool) -> Path:
    """Where the unit or plist is installed."""
    if host.platform == "linux":
        if system:
            return Path("/etc/systemd/system") / units.UNIT_NAME
        config_home = host.environ.get("XDG_CONFIG_HOME") or str(host.home / ".config")
        return Path(config_home) / "systemd" / "user" / units.UNIT_NAME
    if system:
        return Path("/Library/LaunchDaemons") / units.PLIST_NAME
    return host.home / "Library" / "LaunchAgents" / units.PLIST_NAME


def _query(argv: list[str]) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=QUERY_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None


def parse_linger(output: str) -> bool | None:
    """``Linger=yes|no`` from ``loginctl show-user``; None when it is not there."""
    for line in output.splitlines():
        key, _, value = line.strip().partition("=")
        if key == "Linger":
            return {"yes": True, "no": False}.get(value.strip())
    return None


def lingering_enabled(user: str) -> bool | None:
    """Whether logind keeps ``user``'s services running after logout; None: cannot tell."""
    done = _query(["loginctl", "show-user", user, "--property=Linger"])
    if done is None or done.returncode != 0:
        return None
    return parse_linger(done.stdout)


def _systemd_state(system: bool) -> dict[str, str]:
    ctl = ["systemctl"] if system else ["systemctl", "--user"]
    state: dict[str, str] = {}
    for verb, key in (("is-enabled", "enabled"), ("is-active", "active")):
        done = _query([*ctl, verb, units.UNIT_NAME])
        answer = done.stdout.strip().splitlines()[0] if done and done.stdout.strip() else ""
        # systemctl prints a state word even with a non-zero exit ("inactive", "disabled");
        # no word at all means it could not reach the manager.
        state[key] = answer if answer and " " not in answer else "unknown"
    return state


def _launchd_state(host: Host, system: bool) -> dict[str, str]:
    done = _query(["launchctl", "print", f"{host.launchd_domain(system)}/{units.LAUNCHD_LABEL}"])
    if done is None:
        return {"enabled": "unknown", "active": "unknown"}
    if done.returncode != 0:
        return {"enabled": "not loaded", "active": "inactive"}
    running = any(line.strip() == "state = running" for line in done.stdout.splitlines())
    return {"enabled": "loaded", "active": "active" if running else "inactive"}


def service_status(
    config: Config, *, system: bool = False, platform: str | None = None, host: Host | None = None
) -> dict[str, Any]:
    """Installed? enabled? active? plus the daemon's pid from the state dir's lock."""
    host = host or Host.current(platform)
    path = service_file(host, system=system)
    status: dict[str, Any] = {
        "manager": "systemd" if host.platform == "linux" else "launchd",
        "scope": "system" if system else "user",
        "service_file": str(path),
        "installed": path.is_file(),
    }
    if host.platform == "linux":
        status.update(_systemd_state(system))
        if not system:
            status["lingering"] = lingering_enabled(host.user)
    else:
        status.update(_launchd_state(host, system))
    status["daemon_pid"] = daemon_running(config.state_dir)
    return status
