"""Facts about the workdir after a turn: the git branch and the artifacts it produced.

Both are best-effort and bounded: a workdir that is not a git repository, a
missing ``git`` or ``gh``, or a huge tree never fails the task. Only names and
counts leave here — never diffs, paths outside the workdir or file contents.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import Any

from boss_agent.progress.artifacts import artifact_kind
from boss_agent.runner.helper_cmd import run_probe

logger = logging.getLogger(__name__)

GIT_TIMEOUT_S = 10.0  # git status on a big repo on a loaded 2-core box
GH_TIMEOUT_S = 10.0  # `gh auth status` only reads local config
MAX_WALK_ENTRIES = 5000  # an artifact scan of a home directory must stay cheap
MAX_ARTIFACTS = 50
SKIP_DIRS = {".git", "node_modules", ".venv", "venv", "__pycache__", ".cache", ".codex"}


async def _run(argv: list[str], cwd: Path, timeout: float) -> tuple[int, str]:
    return await run_probe(argv, cwd=cwd, timeout=timeout, env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"})


def _numstat(text: str) -> tuple[int, int]:
    insertions = deletions = 0
    for line in text.splitlines():
        added, removed, *_ = line.split("\t") + ["", ""]
        insertions += int(added) if added.isdigit() else 0
        deletions += int(removed) if removed.isdigit() else 0
    return insertions, deletions


async def github_cli(cwd: Path) -> str:
    if not shutil.which("gh"):
        return "missing"
    code, _ = await _run(["gh", "auth", "status"], cwd, GH_TIMEOUT_S)
    return "available" if code == 0 else "unauthenticated"


async def branch_facts(workdir: Path, gh_status: str) -> dict[str, Any] | None:
    """``boss/branch`` params, or None when the workdir is not in a git work tree."""
    if not shutil.which("git"):
        return None
    code, name = await _run(["git", "rev-parse", "--abbrev-ref", "HEAD"], workdir, GIT_TIMEOUT_S)
    if code != 0:
        return None
    _, status = await _run(["git", "status", "--porcelain", "--untracked-files=all"], workdir,
                           GIT_TIMEOUT_S)
    _, numstat = await _run(["git", "diff", "--numstat", "HEAD"], workdir, GIT_TIMEOUT_S)
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
