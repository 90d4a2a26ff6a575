"""Facts about the workdir after a turn: the git branch and the artifacts it produced.

Both are best-effort and bounded: a workdir that is not a git repository, a
missing ``git`` or ``gh``, or a huge tree never fails the task. Only names and
counts leave here — never diffs, paths outside the workdir or file contents.

The probes run outside the turn's sandbox, in a directory the turn could write, so
git must not run any program the repository names: no fsmonitor, no hooks, no
external diff, textconv or clean filter, no system config, and no repository looked
for above the workdir (``GIT_CEILING_DIRECTORIES``). ``gh`` runs outside the workdir.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
from pathlib import Path
from typing import Any

from boss_agent.codexbin import child_environment
from boss_agent.progress.artifacts import artifact_kind
from boss_agent.runner.helper_cmd import run_probe

logger = logging.getLogger(__name__)

GIT_TIMEOUT_S = 10.0  # git status on a big repo on a loaded 2-core box
GH_TIMEOUT_S = 10.0  # `gh auth status` only reads local config
MAX_WALK_ENTRIES = 5000  # an artifact scan of a home directory must stay cheap
MAX_ARTIFACTS = 50
SKIP_DIRS = {".git", "node_modules", ".venv", "venv", "__pycache__", ".cache", ".codex"}


# Config that would otherwise start a program from the repository's own .git/config.
SAFE_GIT_CONFIG = ("-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null")
PASS_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR")  # all git needs from the daemon


def git_env(workdir: Path) -> dict[str, str]:
    """A minimal environment: nothing of the daemon's beyond what git needs to run."""
    env = {name: os.environ[name] for name in PASS_ENV if name in os.environ}
    env.update({"GIT_CONFIG_NOSYSTEM": "1", "GIT_CEILING_DIRECTORIES": str(workdir.parent),
                "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0"})
    return env


async def _git(args: list[str], workdir: Path, extra_config: tuple[str, ...] = ()) -> tuple[int, str]:
    return await run_probe(["git", *SAFE_GIT_CONFIG, *extra_config, *args], cwd=workdir,
                           timeout=GIT_TIMEOUT_S, env=git_env(workdir))


async def _no_filters(workdir: Path) -> tuple[str, ...]:
    """``-c`` options that empty every configured clean/smudge/process filter.

    Filters are chosen by .gitattributes and defined in config, both of which the
    repository controls; git 2.39 has no switch to ignore them, so each one is named.
    Reading config runs nothing.
    """
    _, names = await _git(["config", "--includes", "--name-only", "--get-regexp", r"^filter\."], workdir)
    drivers = {name.split(".", 1)[1].rsplit(".", 1)[0] for name in names.split() if name.count(".") >= 2}
    options: list[str] = []
    for driver in sorted(drivers):
        for key, value in (("clean", ""), ("smudge", ""), ("process", ""), ("required", "false")):
            options += ["-c", f"filter.{driver}.{key}={value}"]
    return tuple(options)


def _numstat(text: str) -> tuple[int, int]:
    insertions = deletions = 0
    for line in text.splitlines():
        added, removed, *_ = line.split("\t") + ["", ""]
        insertions += int(added) if added.isdigit() else 0
        deletions += int(removed) if removed.isdigit() else 0
    return insertions, deletions


async def github_cli() -> str:
    if not shutil.which("gh"):
        return "missing"
    # Not in the workdir: gh reads the repository's git config there.
    code, _ = await run_probe(["gh", "auth", "status"], cwd=Path(os.sep), timeout=GH_TIMEOUT_S,
                              env=child_environment())
    return "available" if code == 0 else "unauthenticated"


def has_own_git(workdir: Path) -> bool:
    """Whether git could find a repository here at all.

    ``GIT_CEILING_DIRECTORIES`` is the workdir's parent, so only a ``.git`` (a
    directory, or a gitfile of a worktree or submodule) in the workdir itself counts:
    without one, every probe would fail, and a stat spares a fork+exec per turn.
    """
    return os.path.lexists(workdir / ".git")


async def branch_facts(workdir: Path, gh_status: str) -> dict[str, Any] | None:
    """``boss/branch`` params, or None when the workdir is not a git work tree's top."""
    if not has_own_git(workdir) or not shutil.which("git"):
        return None
    # Independent reads, run side by side: the branch name and the filter names.
    head, filters = await asyncio.gather(_git(["rev-parse", "--abbrev-ref", "HEAD"], workdir),
                                         _no_filters(workdir))
    code, name = head
    if code != 0:
        return None
    (_, status), (_, numstat) = await asyncio.gather(
        _git(["status", "--porcelain", "--untracked-files=all"], workdir, filters),
        _git(["diff", "--numstat", "--no-ext-diff", "--no-textconv", "HEAD"], workdir, filters))
    insertions, deletions = _numstat(numstat)
    return {"name": name.strip() or None, "changedFiles": len(status.splitlines()),
            "insertions": insertions, "deletions": deletions, "gitOperations": [],
            "githubCli": gh_status}


def find_artifacts(workdir: Path, since: float) -> list[dict[str, str]]:
    """Files of artifact kinds created or rewritten since ``since``; names only. Blocking."""
    found: list[dict[str, str]] = []
    seen = 0
    for root, dirs, files in os.walk(workdir):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith(".")]
        for name in files:
            seen += 1
            if seen > MAX_WALK_ENTRIES or len(found) >= MAX_ARTIFACTS:
                return found
            kind = artifact_kind(name)
            if kind is None:
                continue
            try:
                if os.stat(os.path.join(root, name)).st_mtime >= since:
                    found.append({"name": name, "kind": kind})
            except OSError:
                continue
    return found
