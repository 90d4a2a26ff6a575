"""The documentation a clone carries: links stay inside the repository, every setting is listed."""

import re
from pathlib import Path

import pytest

from boss_agent.config import KEYS

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted((ROOT / "docs").glob("*.md"))
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _links(page: Path) -> list[str]:
    return [target for target in LINK.findall(page.read_text(encoding="utf-8"))
            if not target.startswith(("http://", "https://", "mailto:", "#"))]


@pytest.mark.parametrize("page", [ROOT / "README.md", *DOCS], ids=lambda p: p.name)
def test_every_relative_link_points_at_a_file_in_the_repository(page):
    for target in _links(page):
        resolved = (page.parent / target.split("#", 1)[0]).resolve()
        assert resolved.is_relative_to(ROOT), f"{page.name} links outside the repository: {target}"
        assert resolved.exists(), f"{page.name} links to a missing file: {target}"


def test_the_readme_links_each_doc_page():
    linked = {(ROOT / t.split("#", 1)[0]).resolve() for t in _links(ROOT / "README.md")}
    for page in ("device-api.md", "progress-card.md", "gateway-protocol.md", "configuration.md"):
        assert (ROOT / "docs" / page).resolve() in linked, page


def test_the_configuration_page_lists_every_key_and_its_environment_variable():
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    for key in KEYS:
        assert f"`{key.name}`" in text, key.name
        if key.env:
            assert f"`{key.env}`" in text, key.env


def test_every_test_file_named_in_the_code_and_the_docs_exists() -> None:
    # A test moved to its layer's folder leaves docstrings pointing at nothing otherwise.
    root = Path(__file__).resolve().parents[2]
    sources = [*root.glob("boss_agent/**/*.py"), *root.glob("docs/**/*.md"), root / "README.md"]
    named = {(str(path.relative_to(root)), found) for path in sources
             for found in re.findall(r"tests/[\w/.]+?\.py", path.read_text())}
    assert sorted(name for name in named if not (root / name[1]).exists()) == []
