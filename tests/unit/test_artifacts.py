"""One artifact table: the card's file-change scan and the after-turn git scan agree."""

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
