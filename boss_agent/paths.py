"""Path containment: is this path inside that root, after symlinks and ``..`` are resolved.

The one check behind "a task's workdir must be inside a configured workspace"
(``runner/policy.py``). Comparing strings is wrong both ways (``/work`` vs ``/workshop``, a symlink
out of the root), so both sides are resolved and compared by path components.
"""

from __future__ import annotations

import os
from pathlib import Path

StrPath = str | os.PathLike[str]


def is_inside(path: StrPath, root: StrPath) -> bool:
    """True when ``path`` is ``root`` or below it once both are resolved; False if either cannot be."""
    try:
        resolved, base = Path(os.path.realpath(path)), Path(os.path.realpath(root))
    except (OSError, ValueError):
        return False
    return resolved == base or base in resolved.parents
