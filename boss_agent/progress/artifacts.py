"""The one table of artifact kinds: which files a card shows as an image, APK, document or archive.

Both the card's view of codex's file changes (``progress/items.py``) and the runner's
after-turn scan of the work tree (``runner/gitfacts.py``) classify a file name here,
so the two can never disagree about the same file.
"""

from __future__ import annotations

import os

ARTIFACT_KINDS: dict[str, str] = {
    **dict.fromkeys((".png", ".jpg", ".jpeg", ".gif", ".webp", ".svg", ".bmp"), "image"),
    **dict.fromkeys((".apk", ".aab"), "apk"),
    **dict.fromkeys((".pdf", ".doc", ".docx", ".odt", ".ppt", ".pptx", ".xls", ".xlsx", ".rtf"), "document"),
    **dict.fromkeys((".zip", ".tar", ".gz", ".tgz", ".bz2", ".xz", ".7z", ".rar", ".jar"), "archive"),
}


def artifact_kind(name: str) -> str | None:
    """The kind of the file ``name`` (by its last suffix, any case), or None for other files."""
    return ARTIFACT_KINDS.get(os.path.splitext(name.lower())[1])
