"""Pure unit tests: no process, no socket, no event loop where it can be helped.

Every test below this folder is marked ``unit``.
"""

from pathlib import Path

import pytest

from tests.support.layer import apply_marker


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    apply_marker(items, Path(__file__).parent, "unit")
