"""Finding the Codex CLI, its version, and the environment its children get.

The npm package installs a node wrapper (``bin/codex.js``) that stays as the parent
of the native binary. Spawning the native binary directly saves ~150 ms per start
(observed on codex 0.171.0), so ``resolve_native`` looks for it next to the
wrapper and sets the two variables the wrapper would have set.

``scripts/up.sh`` installs the pinned codex under the checkout's ``.tools/`` (not on the
PATH) and records its path in the state dir (``INSTALLED_CODEX_FILE``); the config then
takes it as ``codex.bin`` when no ``codex.bin`` is set (``installed_codex``).
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from boss_agent.errors import AppServerUnavailable, ConfigError
from boss_agent.identity import ensure_state_dir, write_atomic

PINNED_CODEX_VERSION = "0.171.0"  # the codex release boss-agent is tested with (scripts/setup-common.sh)
INSTALL_HINT = f"npm install -g @openai/codex@{PINNED_CODEX_VERSION}"
INSTALLED_CODEX_FILE = "installed-codex"  # in the state dir: the codex scripts/up.sh installed
VERSION_TIMEOUT_S = 15  # `codex --version` through node can be slow on a loaded 2-core box
_VERSION = re.compile(r"(\d+\.\d+\.\d+(?:[-.][0-9A-Za-z.]+)?)")

# Every BOSS_* variable is the daemon's own (its config, with URLs that carry passwords,
# and its secrets): none reaches codex or the commands it runs.
DAEMON_ENV_PREFIX = "BOSS_"
# The daemon's other variables, named: systemd's channel to the daemon.
DAEMON_SECRET_ENV = (
    "NOTIFY_SOCKET",
    "WATCHDOG_USEC",
    "WATCHDOG_PID",
)

_TRIPLES = {
    ("linux", "x86_64"): ("codex-linux-x64", "x86_64-unknown-linux-musl"),
    ("linux", "aarch64"): ("codex-linux-arm64", "aarch64-unknown-linux-musl"),
    ("darwin", "x86_64"): ("codex-darwin-x64", "x86_64-apple-darwin"),
    ("darwin", "arm64"): ("codex-darwin-arm64", "aarch64-apple-darwin"),
}


@dataclass(frozen=True)
class CodexBinary:
    """How to start codex: argv prefix plus extra environment."""

    path: str
    argv: tuple[str, ...]
    env: dict[str, str]


def find_codex(configured: str | None = None) -> str:
    """The codex executable: the configured one, else `codex` on PATH."""
    candidate = configured or "codex"
    found = shutil.which(os.path.expanduser(candidate))
    if not found:
        where = f"{candidate!r}" if configured else "`codex` on PATH"
        raise AppServerUnavailable(f"codex CLI not found ({where}); install it with `{INSTALL_HINT}`")
    return found


def require_codex(configured: str | None) -> str:
    """``find_codex`` for a command that cannot work without it (`up`, `run`): a config error."""
    try:
        return find_codex(configured)
    except AppServerUnavailable as exc:
        fix = "fix codex.bin" if configured else "or set codex.bin"
        raise ConfigError(f"{exc} ({fix}; `boss-agent doctor` checks it)") from None


def record_installed_codex(state_dir: Path, path: str) -> Path:
    """Remember ``path`` as the installed codex (scripts/up.sh); the record's path."""
    record = ensure_state_dir(state_dir) / INSTALLED_CODEX_FILE
    write_atomic(record, (str(Path(path).absolute()) + "\n").encode())
    return record


def installed_codex(state_dir: Path) -> str | None:
    """The codex scripts/up.sh recorded in ``state_dir``, while it is still an executable file."""
    try:
        path = (Path(state_dir) / INSTALLED_CODEX_FILE).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return path if path and os.path.isfile(path) and os.access(path, os.X_OK) else None


def _native_root(wrapper: Path) -> Path | None:
    """The platform package's vendor dir for the npm wrapper ``.../@openai/codex/bin/codex.js``."""
    key = (platform.system().lower(), platform.machine().lower())
    if wrapper.name != "codex.js" or key not in _TRIPLES:
        return None
    package, triple = _TRIPLES[key]
    codex_pkg = wrapper.parents[1]
    # npm hoists the platform package beside @openai/codex, or nests it inside it.
    for scope in (codex_pkg.parent, codex_pkg / "node_modules" / "@openai"):
        root = scope / package / "vendor" / triple
        native = root / "bin" / "codex"
        if native.is_file() and os.access(native, os.X_OK):
            return root
    return None


def resolve_native(path: str) -> CodexBinary:
    """Prefer the native binary behind the npm wrapper; fall back to ``path`` itself."""
    root = _native_root(Path(os.path.realpath(path)))
    if root is None:
        return CodexBinary(path, (path,), {})
    # The two variables the wrapper sets for its child, and its PATH addition (rg).
    env = {"CODEX_MANAGED_BY_NPM": "1", "CODEX_MANAGED_PACKAGE_ROOT": str(root)}
    path_dir = root / "codex-path"
    if path_dir.is_dir():
        env["PATH"] = f"{path_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    native = str(root / "bin" / "codex")
    return CodexBinary(native, (native,), env)


def codex_version(path: str) -> str:
    """``codex --version`` as a bare version string (``0.171.0``)."""
    try:
        done = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=VERSION_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise AppServerUnavailable(f"codex --version failed: {exc.__class__.__name__}") from exc
    match = _VERSION.search(done.stdout)
    if done.returncode != 0 or not match:
        raise AppServerUnavailable(f"codex --version failed (exit {done.returncode})")
    return match.group(1)


def child_environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The daemon's environment for a codex child, minus every ``BOSS_*`` and the daemon's secrets."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(DAEMON_ENV_PREFIX) and k not in DAEMON_SECRET_ENV}
    env.update(extra or {})
    return env
