"""scripts/setup-common.sh finds a Python >= 3.11 the way a newcomer's machine has one.

Each case runs ``find_python`` in ``env -i``: a PATH of one directory of the test's and
a HOME of its own, so nothing of this machine's Python set-up is seen except the real
interpreters the test links in (from pyenv's versions, or the system's ``python3.X``).
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from boss_agent.codexbin import PINNED_CODEX_VERSION

REPO = Path(__file__).resolve().parents[2]
SETUP = REPO / "scripts" / "setup-common.sh"
BASH = shutil.which("bash") or "/bin/bash"
SCRIPT_TIMEOUT_S = 30  # a few `python -c` version probes


def _real_python(minor: int) -> str:
    """A real CPython 3.<minor> on this machine (pyenv's or the system's); skip without one."""
    root = os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
    found = sorted(glob.glob(f"{root}/versions/3.{minor}.*/bin/python3")) or [
        p for p in (shutil.which(f"python3.{minor}"),) if p]
    if not found:
        pytest.skip(f"no Python 3.{minor} on this machine")
    return os.path.realpath(found[-1])


def _version(tmp_path: Path, root: Path, minor: int) -> Path:
    """``root/versions/3.<minor>.0/bin/python3``, a link to the real interpreter."""
    python = root / "versions" / f"3.{minor}.0" / "bin" / "python3"
    python.parent.mkdir(parents=True)
    python.symlink_to(_real_python(minor))
    return python


def _find(tmp_path: Path, minor: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    """``find_python [minor]`` under ``env -i``: PATH is ``tmp_path/bin``, HOME ``tmp_path/home``."""
    (tmp_path / "bin").mkdir(exist_ok=True)
    clean = {"PATH": str(tmp_path / "bin"), "HOME": str(tmp_path / "home"), **env}
    return subprocess.run(["env", "-i", *(f"{k}={v}" for k, v in clean.items()), BASH, "-c",
                           f'source "{SETUP}" && find_python {minor}'], capture_output=True, text=True,
                          timeout=SCRIPT_TIMEOUT_S, check=False)


def _fake_pyenv(tmp_path: Path, *, root: Path, prefix: str = "") -> None:
    """A `pyenv` on PATH that answers `root`, `versions --bare` and `prefix` as pyenv does."""
    versions = " ".join(p.name for p in (root / "versions").iterdir()) if (root / "versions").is_dir() else ""
    script = tmp_path / "bin" / "pyenv"
    script.parent.mkdir(exist_ok=True)
    script.write_text(f"""#!/bin/sh
case "$1" in
  root) echo "{root}" ;;
  versions) for v in {versions}; do echo "$v"; done ;;
  prefix) [ -n "{prefix}" ] && echo "{prefix}" || exit 1 ;;
esac
""")
    script.chmod(0o755)


@pytest.mark.parametrize("minor", [11, 12])
def test_a_python_in_pyenv_root_is_found(tmp_path: Path, minor: int):
    python = _version(tmp_path, tmp_path / "pyenv", minor)
    done = _find(tmp_path, PYENV_ROOT=str(tmp_path / "pyenv"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(python)


def test_without_pyenv_root_the_default_root_in_home_is_searched(tmp_path: Path):
    python = _version(tmp_path, tmp_path / "home" / ".pyenv", 12)
    done = _find(tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == str(python), done.stderr


def test_pyenvs_own_root_and_versions_are_asked(tmp_path: Path):
    python = _version(tmp_path, tmp_path / "elsewhere", 11)
    _fake_pyenv(tmp_path, root=tmp_path / "elsewhere")
    done = _find(tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == str(python), done.stderr


def test_pyenv_prefix_is_asked(tmp_path: Path):
    python = _version(tmp_path, tmp_path / "local-venvs", 12)
    _fake_pyenv(tmp_path, root=tmp_path / "empty-root", prefix=str(python.parent.parent))
    done = _find(tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == str(python), done.stderr


def test_python3_11_on_the_path_is_found(tmp_path: Path):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python3.11").symlink_to(_real_python(11))
    done = _find(tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == str(tmp_path / "bin" / "python3.11"), done.stderr


def test_only_a_python_too_old_says_exactly_what_is_missing(tmp_path: Path):
    old = _version(tmp_path, tmp_path / "pyenv", 10)
    done = _find(tmp_path, PYENV_ROOT=str(tmp_path / "pyenv"))
    assert done.returncode == 1 and not done.stdout
    assert "no Python >= 3.11 found" in done.stderr
    assert f"{old} (3.10." in done.stderr, "names the interpreter it found too old"
    assert str(tmp_path / "pyenv" / "versions") in done.stderr and "no pyenv on PATH" in done.stderr
    assert "cua" not in done.stderr


def test_no_python_at_all_names_the_places_it_looked(tmp_path: Path):
    done = _find(tmp_path)
    assert done.returncode == 1
    assert f"on PATH ({tmp_path / 'bin'})" in done.stderr
    assert str(tmp_path / "home" / ".pyenv" / "versions") in done.stderr
    assert "install Python 3.11 or newer" in done.stderr


def test_the_scripts_pin_the_codex_version_the_daemon_names():
    pinned = re.search(r'^CODEX_NPM_VERSION="([^"]+)"', SETUP.read_text(), re.M)
    assert pinned is not None and pinned.group(1) == PINNED_CODEX_VERSION


def test_asked_for_3_11_it_passes_over_a_newer_python(tmp_path: Path):
    _version(tmp_path, tmp_path / "pyenv", 12)
    python311 = _version(tmp_path, tmp_path / "pyenv", 11)
    done = _find(tmp_path, "11", PYENV_ROOT=str(tmp_path / "pyenv"))
    assert done.returncode == 0 and done.stdout.strip() == str(python311), done.stderr
