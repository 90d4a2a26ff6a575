"""Real HTTP servers on loopback port 0: the local control plane and the Boss client.

Every test below this folder is marked ``http``.
"""

from pathlib import Path

import pytest

from tests.support.layer import apply_marker


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    apply_marker(items, Path(__file__).parent, "http")
