"""The committed protocol snapshot, the reducer's tables, and ``write_snapshot`` itself."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from boss_agent.cli.protocol_snapshot import coverage_report, read_methods, write_snapshot
from boss_agent.codexversion import NEWEST_TESTED, OLDEST_SUPPORTED, dotted
from tests.conftest import PINNED_CODEX_VERSION

SNAPSHOTS = Path(__file__).resolve().parents[3] / "docs" / "protocol-snapshots" / "codex-app-server"
SNAPSHOT = SNAPSHOTS / PINNED_CODEX_VERSION  # the full one: schema and TypeScript too


def _older_releases_list(key: str) -> set[str]:
    """What the committed snapshots of the range's other releases list under ``key``."""
    names: set[str] = set()
    for methods in SNAPSHOTS.glob("*/methods.json"):
        if methods.parent != SNAPSHOT:
            names.update(json.loads(methods.read_text())[key])
    return names


def test_every_method_and_item_type_of_the_committed_schema_is_classified_by_the_reducer() -> None:
    methods = read_methods(SNAPSHOT / "schema")
    report = coverage_report(methods)
    for key in ("serverNotifications", "serverRequests", "threadItems"):
        assert report[key]["unclassified"] == [], f"{key}: the reducer's table misses these"
        # A name the pinned release dropped stays while an older supported release sends it.
        assert set(report[key]["stale"]) <= _older_releases_list(key), \
            f"{key}: the table names what no supported codex sends"
        assert report[key]["mapped"] + report[key]["ignored"] == len(methods[key])
    assert (len(methods["serverNotifications"]), len(methods["serverRequests"]),
            len(methods["threadItems"])) == (87, 10, 19)


def test_the_committed_coverage_and_methods_files_match_the_schema_and_the_tables() -> None:
    methods = read_methods(SNAPSHOT / "schema")
    committed = json.loads((SNAPSHOT / "coverage.json").read_text())
    assert {k: v for k, v in committed.items() if k != "codexVersion"} == coverage_report(methods)
    listed = json.loads((SNAPSHOT / "methods.json").read_text())
    assert {k: listed[k] for k in methods} == methods


def test_a_method_the_tables_do_not_know_is_reported_unclassified(tmp_path: Path) -> None:
    schema = tmp_path / "schema"
    shutil.copytree(SNAPSHOT / "schema", schema, ignore=shutil.ignore_patterns("v1", "v2", "*.schemas.json"))
    notifications = json.loads((schema / "ServerNotification.json").read_text())
    notifications["oneOf"].append({"properties": {"method": {"enum": ["thread/brandNew"]}}})
    (schema / "ServerNotification.json").write_text(json.dumps(notifications))
    report = coverage_report(read_methods(schema))
    assert report["serverNotifications"]["unclassified"] == ["thread/brandNew"]


@pytest.mark.codex
def test_write_snapshot_reproduces_the_committed_snapshot_from_the_real_binary(
        codex_bin: str, codex_release: str, tmp_path: Path) -> None:
    committed = SNAPSHOTS / codex_release
    full = (committed / "schema").is_dir()  # the pinned release; the others are --summary
    target = write_snapshot(codex_bin, tmp_path, full=full)
    assert target == tmp_path / codex_release
    assert "generate-json-schema" in (target / "help.txt").read_text()
    assert (target / "typescript" / "ServerNotification.ts").is_file() is full
    assert (json.loads((target / "methods.json").read_text())
            == json.loads((committed / "methods.json").read_text()))
    assert (json.loads((target / "coverage.json").read_text())
            == json.loads((committed / "coverage.json").read_text()))
    if full:
        assert ((target / "schema" / "ServerNotification.json").read_text()
                == (committed / "schema" / "ServerNotification.json").read_text())
    else:
        assert not (target / "schema").exists()


def test_every_release_of_the_range_s_ends_has_a_committed_snapshot() -> None:
    for end in (OLDEST_SUPPORTED, NEWEST_TESTED):
        assert (SNAPSHOTS / dotted(end) / "methods.json").is_file(), dotted(end)
