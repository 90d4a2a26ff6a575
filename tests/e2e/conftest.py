"""End to end: the daemon, the control plane and codex together, as a user runs them.

Every test below this folder is marked ``e2e``. The modules that drive the reference
gateway peer (``by-framework``, which needs Python 3.12: they import it or
``tests.support.gateway``) are not collected where it is not installed; the Python 3.11
pass of scripts/test.sh runs the rest.
"""

import importlib.util
import re
from pathlib import Path

import pytest

from tests.support.layer import apply_marker

HAS_GATEWAY_PEER = importlib.util.find_spec("by_framework") is not None
_USES_GATEWAY_PEER = re.compile(r"^\s*(from|import) (by_framework|tests\.support\.gateway)\b", re.M)


def pytest_ignore_collect(collection_path: Path) -> bool | None:
    if HAS_GATEWAY_PEER or collection_path.suffix != ".py" or not collection_path.name.startswith("test_"):
        return None
    return True if _USES_GATEWAY_PEER.search(collection_path.read_text(encoding="utf-8")) else None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    apply_marker(items, Path(__file__).parent, "e2e")
