"""Each test layer's conftest marks the tests below its folder with the layer's marker."""

from pathlib import Path

import pytest


def apply_marker(items: list[pytest.Item], folder: Path, marker: str) -> None:
    """Give every collected test under ``folder`` the ``marker`` (``pytest -m codex`` …)."""
    for item in items:
        if item.path.is_relative_to(folder):
            item.add_marker(marker)
