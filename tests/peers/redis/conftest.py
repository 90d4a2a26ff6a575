"""A real redis-server per test.

Every test below this folder is marked ``redis``.
"""

from pathlib import Path

import pytest

from tests.support.layer import apply_marker


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    apply_marker(items, Path(__file__).parent, "redis")
