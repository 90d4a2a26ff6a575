"""Path containment: is this path inside that root, after symlinks and ``..`` are resolved.

The one check behind "a task's workdir must be inside a configured workspace"
(``runner/policy.py``). Comparing strings is wrong both ways (``/work`` vs ``/workshop``, a symlink
out of the root), so both sides are resolved and compared by path components.

``file_stamp`` is the cheap change marker of one file (a re-pairing, an edited config).
"""

from __future__ import annotations

import os

StrPath = str | os.PathLike[str]
Stamp = tuple[int, int, int] | None  # (inode, size, mtime in ns) of a file, None when absent


def file_stamp(path: StrPath) -> Stamp:
    """What ``path`` looks like now, for telling it changed: replaced, edited, added or removed."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def is_inside(path: StrPath, root: StrPath) -> bool:
    """True when ``path`` is ``root`` or below it once both are resolved; False if either cannot be."""
    try:
        resolved, base = os.path.realpath(path), os.path.realpath(root)
    except (OSError, ValueError):
        return False
    return parts_below(resolved, base) is not None


def parts_below(resolved: str, base: str) -> list[str] | None:
    """The components of ``resolved`` below ``base`` (``[]`` for ``base`` itself), or None
    when it is not inside. Both must be resolved already (``os.path.realpath``): the
    comparison is by whole components, so ``/workshop`` is not below ``/work``."""
    if resolved == base:
        return []
    prefix = base if base.endswith(os.sep) else base + os.sep  # "/" is the only root ending so
    if not resolved.startswith(prefix):
        return None
    return resolved[len(prefix):].split(os.sep)
