"""Git facts after a turn, from real ``git`` on a repository made by the test: the branch,
the changed files and lines, the artifacts; and no git at all where there is no ``.git``."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from boss_agent.runner import gitfacts


def _repo_with_changes(repo: Path) -> None:
    repo.mkdir()
    git = ["git", "-c", "user.email=a@b", "-c", "user.name=a"]
    subprocess.run(["git", "init", "-q", "-b", "feature/x", str(repo)], check=True)
    (repo / "a.txt").write_text("one\ntwo\n")
    subprocess.run([*git, "-C", str(repo), "add", "."], check=True)
    subprocess.run([*git, "-C", str(repo), "commit", "-qm", "init"], check=True)
    (repo / "a.txt").write_text("one\nthree\nfour\n")
    (repo / "new.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")  # binary: no lines to count


async def test_git_facts_count_the_changed_files_and_lines(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    _repo_with_changes(repo)
    facts = await gitfacts.branch_facts(repo, "missing")
    assert facts == {"name": "feature/x", "changedFiles": 2, "insertions": 2, "deletions": 1,
                     "gitOperations": [], "githubCli": "missing"}
    assert await gitfacts.branch_facts(tmp_path, "missing") is None or (tmp_path / ".git").exists()
    assert gitfacts.find_artifacts(repo, 0) == [{"name": "new.png", "kind": "image"}]


async def test_git_facts_count_the_lines_of_new_files_git_diff_leaves_out(tmp_path: Path) -> None:
    """A file the turn created is untracked: ``git diff`` ignores it, the card showed +0."""
    repo = tmp_path / "repo"
    _repo_with_changes(repo)
    (repo / "docs").mkdir()
    (repo / "docs" / "new notes.md").write_text("one\ntwo\nthree")  # no final newline: still 3
    (repo / "small.txt").write_text("x\n")
    outside = tmp_path / "outside.txt"
    outside.write_text("never\nread\n")
    (repo / "link.txt").symlink_to(outside)  # the turn's symlink out of the workdir counts nothing
    os.mkfifo(repo / "pipe")  # nor does a FIFO, and reading it never blocks
    facts = await gitfacts.branch_facts(repo, "missing")
    assert facts is not None
    # a.txt +2 -1 (tracked), then +3 and +1 in the new text files; new.png is binary.
    assert (facts["insertions"], facts["deletions"]) == (6, 1)
    assert facts["changedFiles"] == 5  # a.txt, new.png, docs/new notes.md, small.txt, link.txt (git skips a FIFO)
    # -z gives a rename's source as a field of its own: one changed file, not two.
    assert gitfacts._status_paths("R  new\0old\0?? x\0 M y\0") == ["R  new", "?? x", " M y"]


async def test_git_facts_spawn_no_git_when_the_workdir_has_no_dot_git(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Only a ``.git`` in the workdir itself can count (the ceiling is its parent), so a
    plain directory, even inside a repository, costs no fork+exec after the turn."""
    spawned: list[list[str]] = []
    real_probe = gitfacts.run_probe

    async def counting(argv: list[str], **kwargs: Any) -> tuple[int, str]:
        spawned.append(argv)
        return await real_probe(argv, **kwargs)

    monkeypatch.setattr(gitfacts, "run_probe", counting)
    repo = tmp_path / "repo"
    _repo_with_changes(repo)
    inside = repo / "sub"
    inside.mkdir()
    assert await gitfacts.branch_facts(tmp_path, "missing") is None
    assert await gitfacts.branch_facts(inside, "missing") is None
    assert spawned == []
    assert (await gitfacts.branch_facts(repo, "missing") or {}).get("name") == "feature/x"
    assert spawned
