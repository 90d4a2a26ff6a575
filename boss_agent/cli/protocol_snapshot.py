"""``boss-agent protocol snapshot``: freeze what one codex version speaks.

``write_snapshot`` asks the installed codex for its app-server protocol and writes
``out_dir/<version>/``:

* ``help.txt``         ``codex app-server --help``
* ``schema/``          ``codex app-server generate-json-schema --experimental``
* ``typescript/``      ``codex app-server generate-ts --experimental``
* ``methods.json``     client requests, server notifications, server requests, client
                       notifications and ThreadItem types, read from the schema
* ``coverage.json``    each server notification / request / item type → mapped or
                       ignored, from the progress reducer's own tables, plus anything the
                       tables do not classify (``unclassified``) or no longer exists (``stale``);
                       each mapped one says how it is proven (``proven``: ``realCodex`` with
                       the test, or ``synthetic`` with the reason; ``progress/proof.py``)

``--summary`` (``full=False``) writes only the first and the last two: what the other
releases of the supported range are kept as (docs/codex-versions.md).

The experimental surface is included because the daemon opts in to it
(``capabilities.experimentalApi``). Comparing two snapshots tells what a codex upgrade
changed before it reaches users.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
from pathlib import Path
from typing import Any

from boss_agent.codexbin import app_server_output, codex_version
from boss_agent.progress.proof import proof_of
from boss_agent.progress.reducer import coverage

logger = logging.getLogger(__name__)

_LISTS = {
    "clientRequests": "ClientRequest.json",
    "serverNotifications": "ServerNotification.json",
    "serverRequests": "ServerRequest.json",
    "clientNotifications": "ClientNotification.json",
}
_TABLES = {"serverNotifications": "serverNotifications", "serverRequests": "serverRequests",
           "threadItems": "threadItems"}


def _methods_of(schema: dict[str, Any]) -> list[str]:
    names: list[str] = []
    for variant in schema.get("oneOf", ()):
        method = variant.get("properties", {}).get("method", {})
        names += method.get("enum", []) or ([method["const"]] if "const" in method else [])
    return names


def item_types(schema: dict[str, Any]) -> list[str]:
    """The ``type`` of every ThreadItem variant in a schema file that defines it."""
    item = schema.get("definitions", {}).get("ThreadItem", {})
    types: list[str] = []
    for variant in item.get("oneOf", ()):
        tag = variant.get("properties", {}).get("type", {})
        types += tag.get("enum", []) or ([tag["const"]] if "const" in tag else [])
    return types


def read_methods(schema_dir: Path) -> dict[str, list[str]]:
    """Every method list and the ThreadItem types, from a generated schema directory."""
    out: dict[str, list[str]] = {}
    for key, name in _LISTS.items():
        out[key] = _methods_of(json.loads((schema_dir / name).read_text()))
    notifications = json.loads((schema_dir / _LISTS["serverNotifications"]).read_text())
    out["threadItems"] = item_types(notifications)
    return out


def coverage_report(methods: dict[str, list[str]]) -> dict[str, Any]:
    """The reducer's tables against a protocol: counts, the table, and any gap."""
    tables = coverage()
    report: dict[str, Any] = {}
    for key, table_key in _TABLES.items():
        table = tables[table_key]
        names = methods[key]
        report[key] = {
            "mapped": sum(1 for n in names if table.get(n, {}).get("handling") == "mapped"),
            "ignored": sum(1 for n in names if table.get(n, {}).get("handling") == "ignored"),
            "unclassified": sorted(n for n in names if n not in table),
            "stale": sorted(n for n in table if n not in names),
            "table": {n: _with_proof(n, table[n]) for n in sorted(table)},
        }
    return report


def _with_proof(name: str, entry: dict[str, str]) -> dict[str, str]:
    if entry.get("handling") != "mapped":
        return entry
    return {**entry, **(proof_of(name) or {"proven": "unknown"})}


def write_snapshot(codex_bin: str, out_dir: Path, *, full: bool = True) -> Path:
    """Write ``out_dir/<version>/`` for the codex at ``codex_bin``; return that directory.

    ``full=False`` keeps only help.txt, methods.json and coverage.json: the schema is
    read from a scratch dir, so a release kept for comparison costs kilobytes.
    """
    version = codex_version(codex_bin)
    target = Path(out_dir) / version
    target.mkdir(parents=True, exist_ok=True)
    for generated in ("schema", "typescript"):
        # A re-run replaces the generated trees: a type codex dropped must not linger.
        shutil.rmtree(target / generated, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="boss-snapshot-home-") as home:
        schema = target / "schema" if full else Path(home) / "schema"
        (target / "help.txt").write_text(app_server_output(codex_bin, ["--help"], home))
        app_server_output(codex_bin, ["generate-json-schema", "--experimental", "--out", str(schema)], home)
        if full:
            app_server_output(codex_bin, ["generate-ts", "--experimental", "--out", str(target / "typescript")],
                              home)
        methods = read_methods(schema)
    (target / "methods.json").write_text(json.dumps(
        {"codexVersion": version, **methods, "counts": {k: len(v) for k, v in methods.items()}},
        indent=2) + "\n")
    (target / "coverage.json").write_text(json.dumps(
        {"codexVersion": version, **coverage_report(methods)}, indent=2) + "\n")
    logger.info("protocol snapshot of codex %s written to %s", version, target)
    return target
