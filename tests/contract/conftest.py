"""Contract tests: the same tests over every implementation of a role.

Every test below this folder is marked ``contract``.
"""

from pathlib import Path

import pytest

from tests.support.layer import apply_marker


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    apply_marker(items, Path(__file__).parent, "contract")
