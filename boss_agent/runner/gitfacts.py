"""Facts about the workdir after a turn: the git branch and the artifacts it produced.

Both are best-effort and bounded: a workdir that is not a git repository, a
missing ``git`` or ``gh``, or a huge tree never fails the task. Only names and
counts leave here — never diffs, paths outside the workdir or file contents.

The probes run outside the turn's sandbox, in a directory the turn could write, so
git must not run any program the repository names: no fsmonitor, no hooks, no
external diff, textconv or clean filter, no system config, and no repository looked
for above the workdir (``GIT_CEILING_DIRECTORIES``). ``gh`` runs outside the workdir.

``git diff`` counts tracked files only, so a file the turn created (untracked) adds
its own lines to the insertions, counted here with the same bounds: a new file shows
+N, not +0.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from boss_agent.codexbin import child_environment
from boss_agent.progress.artifacts import artifact_kind
from boss_agent.runner.helper_cmd import run_probe

logger = logging.getLogger(__name__)

GIT_TIMEOUT_S = 10.0  # git status on a big repo on a loaded 2-core box
GH_TIMEOUT_S = 10.0  # `gh auth status` only reads local config
MAX_WALK_ENTRIES = 5000  # an artifact scan of a home directory must stay cheap
INLINE_WALK_ENTRIES = 64  # walked on the event loop: a few dozen cached-type entries cost less than a thread hop
MAX_ARTIFACTS = 50
MAX_UNTRACKED_FILES = 200  # new files whose lines count; a fresh node_modules must stay cheap
MAX_UNTRACKED_BYTES = 1 << 20  # per file: a bigger new file counts as changed, its lines not read
MAX_UNTRACKED_TOTAL_BYTES = 8 << 20  # all of them: reading stays well under a second on a busy box
BINARY_SNIFF_BYTES = 8000  # git's own rule: a NUL in the first 8000 bytes makes a file binary
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


def _status_paths(status: str) -> list[str]:
    """The paths of ``git status --porcelain -z``; a rename's or copy's source is not one."""
    fields, paths = iter(status.split("\0")), []
    for entry in fields:
        if len(entry) < 4:
            continue
        paths.append(entry)
        if "R" in entry[:2] or "C" in entry[:2]:
            next(fields, None)  # -z gives the source as the next field
    return paths


def _read_new_file(workdir: Path, relative: str, budget: int) -> bytes | None:
    """An untracked file's bytes, or None for what is not read.

    The turn could have planted anything here, so only a regular file right in the
    workdir is read (no symlink, FIFO or device; nothing outside through a swapped
    directory), at most ``MAX_UNTRACKED_BYTES`` and ``budget``, never blocking.
    """
    path = workdir / relative
    if not Path(os.path.realpath(path.parent)).is_relative_to(os.path.realpath(workdir)):
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as file:
            info = os.fstat(file.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_size > min(MAX_UNTRACKED_BYTES, budget):
                return None
            return file.read(info.st_size + 1)
    except OSError:
        return None


def _numstat_lines(data: bytes) -> int:
    """Lines as git's numstat counts a new file: a last line without a newline counts."""
    if b"\0" in data[:BINARY_SNIFF_BYTES]:
        return 0  # numstat shows "-" for a binary file
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def _untracked_lines(workdir: Path, status: str) -> int:
    """Lines in the new files ``git diff`` leaves out (it sees only tracked ones). Blocking."""
    new = [entry[3:] for entry in _status_paths(status) if entry.startswith("??")]
    lines, budget = 0, MAX_UNTRACKED_TOTAL_BYTES
    for relative in new[:MAX_UNTRACKED_FILES]:
        data = _read_new_file(workdir, relative, budget)
        if data is not None:
            lines += _numstat_lines(data)
            budget -= len(data)
    return lines


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
        _git(["status", "--porcelain", "-z", "--untracked-files=all"], workdir, filters),
        _git(["diff", "--numstat", "--no-ext-diff", "--no-textconv", "HEAD"], workdir, filters))
    insertions, deletions = _numstat(numstat)
    insertions += await asyncio.to_thread(_untracked_lines, workdir, status)
    return {"name": name.strip() or None, "changedFiles": len(_status_paths(status)),
            "insertions": insertions, "deletions": deletions, "gitOperations": [],
            "githubCli": gh_status}


class ArtifactScan:
    """The artifact walk in steps: ``advance(n)`` looks at up to ``n`` more entries.

    Top-down, as ``os.walk`` walks: a symlinked directory is not followed, hidden and
    ``SKIP_DIRS`` directories are skipped, and the walk ends after ``MAX_WALK_ENTRIES``
    entries (directories count too) or ``MAX_ARTIFACTS`` finds. Stepping lets a small
    folder be walked at once where the caller is, and a big one finished in a thread.
    Blocking, one step at a time.
    """

    def __init__(self, workdir: Path, since: float) -> None:
        self.since = since
        self.found: list[dict[str, str]] = []
        self.done = False
        self._pending: list[str] = [str(workdir)]  # directories still to list, next last
        self._listing: Iterator[os.DirEntry[str]] | None = None
        self._close: Callable[[], None] = lambda: None
        self._subdirs: list[str] = []  # of the directory being listed
        self._entries = 0

    def advance(self, budget: int) -> bool:
        """Look at up to ``budget`` more entries; whether the walk is over."""
        while budget > 0 and not self.done:
            entry = self._next_entry()
            if entry is None:
                self.done = True
                break
            budget -= 1
            self._entries += 1
            if self._entries > MAX_WALK_ENTRIES:
                self.stop()
            else:
                self._look(entry)
        return self.done

    def stop(self) -> None:
        self.done = True
        self._close()
        self._listing = None

    def _next_entry(self) -> os.DirEntry[str] | None:
        while True:
            if self._listing is None:
                if not self._pending:
                    return None
                try:
                    listing = os.scandir(self._pending.pop())
                except OSError:
                    continue
                self._listing, self._close = listing, listing.close
            try:
                entry = next(self._listing, None)
            except OSError:
                entry = None
            if entry is not None:
                return entry
            self._close()
            self._listing = None
            self._pending.extend(reversed(self._subdirs))  # depth first, in listing order
            self._subdirs = []

    def _look(self, entry: os.DirEntry[str]) -> None:
        try:
            is_dir = entry.is_dir()  # follows a symlink, as os.walk decides
        except OSError:
            is_dir = False
        if is_dir:
            if entry.name not in SKIP_DIRS and not entry.name.startswith(".") and not entry.is_symlink():
                self._subdirs.append(entry.path)
            return
        kind = artifact_kind(entry.name)
        if kind is None:
            return
        try:
            modified = os.stat(entry.path).st_mtime
        except OSError:
            return
        if modified >= self.since:
            self.found.append({"name": entry.name, "kind": kind})
            if len(self.found) >= MAX_ARTIFACTS:
                self.stop()


def find_artifacts(workdir: Path, since: float) -> list[dict[str, str]]:
    """Files of artifact kinds created or rewritten since ``since``; names only. Blocking."""
    scan = ArtifactScan(workdir, since)
    scan.advance(MAX_WALK_ENTRIES + 1)
    return scan.found


async def artifacts(workdir: Path, since: float) -> list[dict[str, str]]:
    """``find_artifacts`` without blocking the event loop: a folder of up to
    ``INLINE_WALK_ENTRIES`` entries is walked right here (a thread's round trip costs
    more than that), a bigger one is finished in a thread."""
    scan = ArtifactScan(workdir, since)
    if not scan.advance(INLINE_WALK_ENTRIES):
        await asyncio.to_thread(scan.advance, MAX_WALK_ENTRIES + 1)  # ends the walk, whatever is left
    return scan.found
