"""End to end: the daemon, the control plane and codex together, as a user runs them.

Every test below this folder is marked ``e2e``. The modules that drive the reference
gateway peer (``by-framework``, which needs Python 3.12: they import it or
``tests.support.gateway``, or the bench) are not collected on Python 3.11; the 3.11 pass of
scripts/test.sh runs the rest, and the 3.12 run runs them all.
"""

import re
import sys
from pathlib import Path

import pytest

from tests.support.layer import apply_marker

# Only the 3.11 pass leaves them out: on 3.12 a missing peer fails the import, loudly.
HAS_GATEWAY_PEER = sys.version_info >= (3, 12)
# The bench drives the gateway peer too (rows 7, 11, 12b, 14).
_USES_GATEWAY_PEER = re.compile(r"^\s*(from|import) (by_framework|tests\.support\.gateway|bench)\b", re.M)


def pytest_ignore_collect(collection_path: Path) -> bool | None:
    if HAS_GATEWAY_PEER or collection_path.suffix != ".py" or not collection_path.name.startswith("test_"):
        return None
    return True if _USES_GATEWAY_PEER.search(collection_path.read_text(encoding="utf-8")) else None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    apply_marker(items, Path(__file__).parent, "e2e")
