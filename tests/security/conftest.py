"""Hostile tasks against the trust boundary, end to end with real codex and real git.

Every test below this folder is marked ``security``.
"""

from pathlib import Path

import pytest

from tests.support.layer import apply_marker


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    apply_marker(items, Path(__file__).parent, "security")
