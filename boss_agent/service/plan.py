"""`service install|uninstall` as data: a plan of steps, then ``apply`` runs it.

``plan_install`` decides everything (which file, what content, which commands)
without changing the machine, so ``--dry-run`` prints exactly what ``apply`` would
do and tests check plans without touching systemd or launchd. The only thing it
reads from the machine is where programs are (``boss-agent``, ``codex``, ``node``)
and, for a user unit, whether lingering is on.

The service environment is an allow-list: PATH (so ``codex`` and ``node`` are found
when systemd or launchd start us with their bare default PATH), the config file,
the state dir, ``CODEX_HOME`` when set, and on Linux the graphical session's display
variables (``DESKTOP_ENV``): systemd starts the service outside the desktop session,
so without them computer use could never reach the screen. Nothing else from the
installing shell reaches the file, so no token or API key can.
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import site
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import boss_agent
from boss_agent.codexbin import find_codex
from boss_agent.config import Config
from boss_agent.errors import AppServerUnavailable, ServiceError, StateError
from boss_agent.identity import load_identity
from boss_agent.redact import mask_secrets
from boss_agent.service import units
from boss_agent.service.manager import Host, lingering_enabled, service_file

logger = logging.getLogger(__name__)

COMMAND_TIMEOUT_S = 60  # systemctl/launchctl answer in well under a second; 60 covers a slow boot
MAX_ERROR_CHARS = 300  # systemctl's first complaint is the useful part
PASSTHROUGH_ENV = ("CODEX_HOME",)  # user settings codex reads; never secrets
DESKTOP_ENV = ("DISPLAY", "XAUTHORITY", "WAYLAND_DISPLAY")  # where the desktop is; a path, not its cookie
_DEFAULT_PATH = ("/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin")
_DARWIN_PATH = ("/opt/homebrew/bin", "/usr/local/bin")


@dataclass(frozen=True)
class WriteFile:
    path: Path
    content: str
    mode: int = 0o644


@dataclass(frozen=True)
class MakeDir:
    path: Path
    mode: int = 0o700


@dataclass(frozen=True)
class RemoveFile:
    path: Path


@dataclass(frozen=True)
class RunCommand:
    argv: tuple[str, ...]
    check: bool = True  # False: a failure is expected sometimes (e.g. unloading what is not loaded)


Step = WriteFile | MakeDir | RemoveFile | RunCommand


@dataclass(frozen=True)
class InstallPlan:
    """What an install or uninstall does, in order."""

    action: str  # "install" or "uninstall"
    platform: str  # "linux" or "darwin"
    system: bool
    service_file: Path
    steps: tuple[Step, ...]
    warnings: tuple[str, ...] = field(default=())

    @property
    def files(self) -> tuple[WriteFile, ...]:
        return tuple(step for step in self.steps if isinstance(step, WriteFile))

    @property
    def commands(self) -> tuple[RunCommand, ...]:
        return tuple(step for step in self.steps if isinstance(step, RunCommand))

    @property
    def kind(self) -> str:
        manager = "systemd" if self.platform == "linux" else "launchd"
        return f"{manager} {'system' if self.system else 'user'} service"

    def render(self) -> str:
        """The dry-run text: every file with its content, every command."""
        out = [f"boss-agent service {self.action} ({self.kind}) would:"]
        for step in self.steps:
            out.extend(_describe(step))
        out.extend(f"warning: {text}" for text in self.warnings)
        return "\n".join(out) + "\n"


def _describe(step: Step) -> list[str]:
    match step:
        case WriteFile(path, content, mode):
            body = [f"    | {line}" if line else "    |" for line in content.splitlines()]
            return [f"write {path} (mode {mode:04o}):", *body]
        case MakeDir(path, mode):
            return [f"create directory {path} (mode {mode:04o})"]
        case RemoveFile(path):
            return [f"remove {path}"]
        case RunCommand(argv, check):
            return [f"run: {shlex.join(argv)}" + ("" if check else "   (a failure is ignored)")]
    raise TypeError(step)


# ------------------------------------------------------------------- what to run


def _package_on_default_path() -> bool:
    root = Path(boss_agent.__file__).resolve().parent.parent
    installed = {Path(p).resolve() for p in (*site.getsitepackages(), site.getusersitepackages())}
    return root in installed


def service_command(config: Config) -> str:
    """``run`` for a Boss server; without a ``server.url``, ``up``: the local control plane,
    its page and the daemon, so the embedded default survives a reboot too."""
    return "run" if config.server_url else "up"


def daemon_command(command: str = "run") -> tuple[tuple[str, ...], dict[str, str]]:
    """argv for ``boss-agent COMMAND`` and any environment it needs to import boss_agent.

    The console script next to this interpreter when there is one (a pipx or venv
    install), else ``sys.executable -m boss_agent`` (a source checkout, which then
    also needs PYTHONPATH since systemd does not start us in the checkout).
    """
    script = Path(sys.executable).parent / "boss-agent"
    if script.is_file() and os.access(script, os.X_OK):
        return (str(script), command), {}
    extra = {} if _package_on_default_path() else {
        "PYTHONPATH": str(Path(boss_agent.__file__).resolve().parent.parent)
    }
    return (sys.executable, "-m", "boss_agent", command), extra


def service_path_variable(config: Config, host: Host, program: str) -> tuple[str, list[str]]:
    """PATH for the service: codex's directory, the user's PATH, then node's and ours.

    systemd and launchd start services with a bare PATH; without this an npm or nvm
    install of codex (and the node its wrapper runs on) would not be found.
    """
    warnings: list[str] = []
    dirs: list[str] = []
    try:
        dirs.append(str(Path(find_codex(config.codex.bin)).parent))
    except AppServerUnavailable:
        warnings.append("codex was not found: set codex.bin in the config before tasks can run")
    dirs.extend(host.environ.get("PATH", "").split(os.pathsep))
    node = shutil.which("node", path=host.environ.get("PATH"))
    if node:
        dirs.append(str(Path(node).parent))  # the npm codex wrapper is a node script
    dirs.append(str(Path(program).parent))
    dirs.extend(_DARWIN_PATH if host.platform == "darwin" else ())
    dirs.extend(_DEFAULT_PATH)
    unique = [d for i, d in enumerate(dirs) if d.startswith("/") and d not in dirs[:i]]
    return os.pathsep.join(unique), warnings


def service_spec(config: Config, host: Host, *, system: bool) -> tuple[units.ServiceSpec, list[str]]:
    argv, extra_env = daemon_command(service_command(config))
    path, warnings = service_path_variable(config, host, argv[0])
    environment = {"PATH": path, "BOSS_STATE_DIR": str(config.state_dir.resolve())}
    if config.config_path is not None:
        environment["BOSS_AGENT_CONFIG"] = str(config.config_path.resolve())
    environment.update(extra_env)
    passthrough = PASSTHROUGH_ENV + (DESKTOP_ENV if host.platform == "linux" else ())
    environment.update({k: host.environ[k] for k in passthrough if host.environ.get(k)})
    user = (host.environ.get("SUDO_USER") or host.user) if system else None
    if system and user == "root":
        warnings.append("the system service would run as root: install it with sudo from your account")
    spec = units.ServiceSpec(
        argv=argv, environment=environment, grace_period_s=config.grace_period_s,
        log_dir=config.state_dir.resolve() / "logs", home=host.home, system=system, user=user,
    )
    return spec, warnings


# ------------------------------------------------------------------------ plans


def plan_install(
    config: Config,
    *,
    system: bool,
    platform: str | None = None,
    host: Host | None = None,
    linger_probe: Callable[[str], bool | None] = lingering_enabled,
) -> InstallPlan:
    """Files to write and commands to run for ``service install``; changes nothing."""
    host = host or Host.current(platform)
    spec, warnings = service_spec(config, host, system=system)
    if service_command(config) == "run":  # `up` pairs with its own control plane
        warnings.extend(_pairing_warning(config.state_dir))
    path = service_file(host, system=system)
    if host.platform == "linux":
        steps = _systemd_install(path, spec, system)
        if not system:
            warnings.extend(_linger_warning(host.user, linger_probe))
    else:
        steps = _launchd_install(path, spec, host, system)
    return InstallPlan("install", host.platform, system, path, tuple(steps), tuple(warnings))


def _pairing_warning(state_dir: Path) -> list[str]:
    """The service waits for pairing rather than failing; say so before it is installed."""
    then = "the service will wait until you run `boss-agent pair CODE --server URL`"
    try:
        paired = load_identity(state_dir) is not None
    except StateError:
        return [f"the device identity in {state_dir} is damaged: {then}"]
    return [] if paired else [f"this device is not paired yet: {then}"]


def plan_uninstall(
    config: Config, *, system: bool, platform: str | None = None, host: Host | None = None
) -> InstallPlan:
    """Commands and removals for ``service uninstall``; changes nothing."""
    host = host or Host.current(platform)
    path = service_file(host, system=system)
    if host.platform == "linux":
        ctl = _systemctl(system)
        steps: list[Step] = [
            RunCommand((*ctl, "disable", "--now", units.UNIT_NAME), check=False),
            RemoveFile(path),
            RunCommand((*ctl, "daemon-reload")),
            RunCommand((*ctl, "reset-failed", units.UNIT_NAME), check=False),
        ]
    else:
        target = f"{host.launchd_domain(system)}/{units.LAUNCHD_LABEL}"
        steps = [RunCommand(("launchctl", "bootout", target), check=False), RemoveFile(path)]
    return InstallPlan("uninstall", host.platform, system, path, tuple(steps))


def _systemctl(system: bool) -> tuple[str, ...]:
    return ("systemctl",) if system else ("systemctl", "--user")


def _systemd_install(path: Path, spec: units.ServiceSpec, system: bool) -> list[Step]:
    ctl = _systemctl(system)
    return [
        WriteFile(path, units.render_systemd_unit(spec)),
        RunCommand((*ctl, "daemon-reload")),
        RunCommand((*ctl, "enable", units.UNIT_NAME)),
        # restart, not start: a re-install must replace a daemon running the old unit.
        RunCommand((*ctl, "restart", units.UNIT_NAME)),
    ]


def _launchd_install(path: Path, spec: units.ServiceSpec, host: Host, system: bool) -> list[Step]:
    domain = host.launchd_domain(system)
    target = f"{domain}/{units.LAUNCHD_LABEL}"
    return [
        MakeDir(spec.log_dir),  # launchd does not create the log files' directory
        WriteFile(path, units.render_launchd_plist(spec)),
        RunCommand(("launchctl", "bootout", target), check=False),  # a previous version
        RunCommand(("launchctl", "enable", target)),
        RunCommand(("launchctl", "bootstrap", domain, str(path))),  # RunAtLoad starts it
    ]


def _linger_warning(user: str, probe: Callable[[str], bool | None]) -> list[str]:
    linger = probe(user)
    if linger is True:
        return []
    if linger is False:
        return [f"lingering is off for {user}: the service stops when you log out "
                f"(turn it on with `loginctl enable-linger {user}`)"]
    return ["cannot tell whether lingering is on (loginctl gave no answer): without it the "
            f"service stops when you log out (`loginctl enable-linger {user}`)"]


# ------------------------------------------------------------------------ apply


def apply(plan: InstallPlan, *, environ: Mapping[str, str] | None = None) -> None:
    """Carry out ``plan`` step by step; the first failing step raises ServiceError."""
    for step in plan.steps:
        match step:
            case WriteFile(path, content, mode):
                _write_atomically(path, content, mode)
            case MakeDir(path, mode):
                _guard(lambda: path.mkdir(parents=True, exist_ok=True, mode=mode), f"create {path}")
            case RemoveFile(path):
                _guard(lambda: path.unlink(missing_ok=True), f"remove {path}")
            case RunCommand(argv, check):
                run_command(argv, check=check, environ=environ)


def _guard(action: Callable[[], object], what: str) -> None:
    try:
        action()
    except OSError as exc:
        raise ServiceError(f"cannot {what}: {exc.strerror}") from exc


def _write_atomically(path: Path, content: str, mode: int) -> None:
    tmp = path.with_name(f".{path.name}.tmp")

    def write() -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(content, encoding="utf-8")
        tmp.chmod(mode)
        os.replace(tmp, path)

    try:
        _guard(write, f"write {path}")
    finally:
        tmp.unlink(missing_ok=True)


def run_command(
    argv: Sequence[str], *, check: bool = True, environ: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str] | None:
    """Run a service-manager command; None when it could not be started at all."""
    try:
        done = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False,
            env=None if environ is None else dict(environ),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        if check:
            message = f"`{shlex.join(argv)}` failed: {exc.__class__.__name__}"
            raise ServiceError(mask_secrets(message)) from exc
        return None
    if check and done.returncode != 0:
        detail = (done.stderr or done.stdout).strip()[:MAX_ERROR_CHARS]
        # Masked, not path-rewritten: the user needs the real paths to fix this.
        raise ServiceError(mask_secrets(f"`{shlex.join(argv)}` failed (exit {done.returncode}): {detail}"))
    if done.returncode != 0:
        logger.debug("ignored failure of %s (exit %s)", argv[0], done.returncode)
    return done
