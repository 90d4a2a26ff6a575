"""``codex_files``: what tells a thread made ahead from one codex would make now
(runner/thread_ahead.py). Its use against real codex: tests/peers/codex/test_thread_ahead.py."""

from __future__ import annotations

import os
from pathlib import Path

from boss_agent.runner.thread_ahead import codex_files


def _tree(tmp_path: Path) -> tuple[Path, Path]:
    home, work = tmp_path / "home", tmp_path / "repo" / "sub" / "work"
    home.mkdir()
    work.mkdir(parents=True)
    (home / "config.toml").write_text('model = "a"\n')
    return home, work


def test_unchanged_files_give_the_same_value(tmp_path: Path) -> None:
    home, work = _tree(tmp_path)
    assert codex_files(home, str(work)) == codex_files(home, str(work))


def test_an_edit_of_the_same_size_in_codex_s_home_changes_it(tmp_path: Path) -> None:
    home, work = _tree(tmp_path)
    before = codex_files(home, str(work))
    (home / "config.toml").write_text('model = "b"\n')
    stat = (home / "config.toml").stat()
    os.utime(home / "config.toml", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert codex_files(home, str(work)) != before


def test_a_file_added_or_removed_in_codex_s_home_changes_it(tmp_path: Path) -> None:
    home, work = _tree(tmp_path)
    before = codex_files(home, str(work))
    (home / "requirements.toml").write_text("")
    added = codex_files(home, str(work))
    assert added != before
    (home / "config.toml").unlink()
    assert codex_files(home, str(work)) not in (before, added)


def test_a_project_config_in_the_folder_or_any_folder_above_changes_it(tmp_path: Path) -> None:
    home, work = _tree(tmp_path)
    before = codex_files(home, str(work))
    (tmp_path / "repo" / ".codex").mkdir()
    (tmp_path / "repo" / ".codex" / "config.toml").write_text("")
    above = codex_files(home, str(work))
    assert above != before
    (work / ".codex").mkdir()
    (work / ".codex" / "config.toml").write_text("")
    assert codex_files(home, str(work)) not in (before, above)


def test_files_elsewhere_do_not_change_it(tmp_path: Path) -> None:
    home, work = _tree(tmp_path)
    before = codex_files(home, str(work))
    (work / "notes.txt").write_text("x")
    (home / "history.jsonl").write_text("x")
    (tmp_path / "repo" / "sub" / "other").mkdir()
    assert codex_files(home, str(work)) == before
