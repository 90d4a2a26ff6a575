"""coverage.json says how each mapped method is proven, and the claim holds up.

Before this, "mapped" meant a handler existed; nothing said whether any real codex
message ever reached it (the connection-level notifications had handlers no live
card could reach).
"""

from __future__ import annotations

import json
from pathlib import Path

from boss_agent.cli.protocol_snapshot import coverage_report, read_methods
from boss_agent.progress.proof import PROOF, REAL, SYNTHETIC
from tests.conftest import PINNED_CODEX_VERSION

REPO = Path(__file__).resolve().parents[2]
SNAPSHOT = REPO / "docs" / "protocol-snapshots" / "codex-app-server" / PINNED_CODEX_VERSION
TABLES = ("serverNotifications", "serverRequests", "threadItems")


def test_every_mapped_method_says_how_it_is_proven_and_ignored_ones_claim_nothing() -> None:
    committed = json.loads((SNAPSHOT / "coverage.json").read_text())
    for key in TABLES:
        for name, entry in committed[key]["table"].items():
            if entry["handling"] == "mapped":
                assert entry["proven"] in (REAL, SYNTHETIC), f"{key} {name}: no proof column"
                assert entry.get("test" if entry["proven"] == REAL else "reason"), name
            else:
                assert "proven" not in entry, f"{name} is ignored; it needs no proof"


def test_the_proof_table_names_exactly_the_mapped_methods_and_real_tests_run_codex() -> None:
    report = coverage_report(read_methods(SNAPSHOT / "schema"))
    mapped = {name for key in TABLES for name, entry in report[key]["table"].items()
              if entry["handling"] == "mapped"}
    assert set(PROOF) == mapped
    for name, (how, evidence) in PROOF.items():
        if how == REAL:
            # The codex layer marks every test below it; elsewhere the module says so itself.
            source = (REPO / evidence).read_text()
            runs_codex = evidence.startswith("tests/peers/codex/") or "pytest.mark.codex" in source
            assert runs_codex, f"{name}: {evidence} does not run real codex"
