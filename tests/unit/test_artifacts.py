"""One artifact table: the card's file-change scan and the after-turn git scan agree."""

import time

import pytest

from boss_agent.progress import items
from boss_agent.runner import gitfacts

NAMES = {
    "shot.PNG": "image", "diagram.svg": "image", "scan.bmp": "image",
    "app-release.apk": "apk", "bundle.aab": "apk",
    "notes.pdf": "document", "letter.doc": "document", "deck.pptx": "document", "sheet.xls": "document",
    "memo.rtf": "document", "essay.odt": "document",
    "dist.zip": "archive", "src.tar.gz": "archive", "logs.tgz": "archive", "data.tar.xz": "archive",
    "old.rar": "archive", "lib.jar": "archive", "dump.bz2": "archive",
    "main.py": None, "README": None, "archive.": None,
}


@pytest.mark.parametrize(("name", "kind"), sorted(NAMES.items()))
def test_both_scans_give_a_file_the_same_kind(name, kind):
    assert items.artifact_kind(name) == kind
    assert gitfacts.artifact_kind(name) == kind


def _tree(root, files, dirs=0):
    """``files`` artifacts spread over ``dirs`` subfolders, with what the walk must skip."""
    for index in range(files):
        folder = root / f"d{index % dirs}" if dirs else root
        folder.mkdir(exist_ok=True)
        (folder / f"shot{index}.png").write_bytes(b"x")
        (folder / f"code{index}.py").write_text("x")
    for skipped in (".hidden", "node_modules", ".git"):
        (root / skipped).mkdir()
        (root / skipped / "inside.png").write_bytes(b"x")


def _names(found):
    return sorted(entry["name"] for entry in found)


async def test_a_folder_past_the_inline_budget_is_walked_to_its_end_in_a_thread(tmp_path, monkeypatch):
    """The event loop walks the first INLINE_WALK_ENTRIES entries; the rest is finished in
    a thread, with the same finds as one walk in one go."""
    _tree(tmp_path, files=40, dirs=5)
    (tmp_path / "linked").symlink_to(tmp_path / "d0")  # a symlinked folder is not followed
    threads = []
    real_to_thread = gitfacts.asyncio.to_thread

    async def counting_to_thread(function, /, *args):
        threads.append(function)
        return await real_to_thread(function, *args)

    monkeypatch.setattr(gitfacts.asyncio, "to_thread", counting_to_thread)
    found = await gitfacts.artifacts(tmp_path, 0)
    assert _names(found) == sorted(f"shot{index}.png" for index in range(40))
    assert _names(gitfacts.find_artifacts(tmp_path, 0)) == _names(found)
    assert len(threads) == 1  # 40 × 2 files and 5 folders are more than one inline step

    threads.clear()
    small = tmp_path / "d1"
    assert _names(await gitfacts.artifacts(small, 0)) == sorted(f"shot{index}.png" for index in range(1, 40, 5))
    assert threads == []  # 16 entries: no thread's round trip


async def test_files_older_than_the_turn_are_not_artifacts(tmp_path):
    _tree(tmp_path, files=3)
    assert await gitfacts.artifacts(tmp_path, time.time() + 60) == []


def test_the_walk_is_bounded_by_entries_folders_included(tmp_path, monkeypatch):
    """A tree of folders alone used to be walked to its end (only files counted)."""
    monkeypatch.setattr(gitfacts, "MAX_WALK_ENTRIES", 5)
    deep = tmp_path
    for level in range(20):
        deep = deep / f"level{level}"
    deep.mkdir(parents=True)
    (deep / "far.png").write_bytes(b"x")
    assert gitfacts.find_artifacts(tmp_path, 0) == []


def test_the_walk_stops_at_max_artifacts(tmp_path):
    _tree(tmp_path, files=gitfacts.MAX_ARTIFACTS + 10)
    assert len(gitfacts.find_artifacts(tmp_path, 0)) == gitfacts.MAX_ARTIFACTS
