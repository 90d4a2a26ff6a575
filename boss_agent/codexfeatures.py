"""What one codex binary offers that a promise of the daemon depends on.

Detected once per binary from its own ``codex app-server generate-json-schema`` and
cached in the state dir (``codex-features.json``), keyed by the binary's real path,
version and mtime, so an upgrade in place is noticed. What the schema cannot tell (an
environment variable, when a steer is applied, the ``_meta`` of a tool approval) is
taken from the version, as measured on the real releases (docs/codex-versions.md).
Each feature has a fallback or an honest refusal where it is used:

- ``turn_tag``: ``turn/start``/``turn/steer`` take ``clientUserMessageId``; without it a
  lost answer is never resent (the task fails ``app_server_lost``; appserver/methods.py).
- ``turns_list``: ``thread/turns/list``, which that check reads.
- ``settings_update``: ``thread/settings/update``; without it a follow-up whose thread
  holds other limits fails ``thread_limits_unenforceable`` (runner/turn.py).
- ``current_time_read``: codex asks the client the time (0.150 … 0.169); answered.
- ``tool_call_env``: commands carry ``CODEX_TOOL_CALL_ID``; without it the cancel sweep
  picks the thread's commands started after the turn began (runner/cancel_sweep.py).
- ``tool_approval_meta``: MCP tool approvals carry ``_meta.tool_name`` and the tool's
  annotations; without them the name and risk come from the message (progress/tool_identity.py).
- ``immediate_steer``: a steer reaches the model at once; before, it waits for the
  response in flight and the steer is shown as queued.
- ``interrupt_closes_stream``: ``turn/interrupt`` closes the model request; before, the
  task still ends cancelled and its commands are ended, but the provider's response runs
  on (nothing on the client's side can close it).
- ``thread_unload``: a thread let go (``thread/unsubscribe``) is unloaded; before, it stays
  loaded for the app-server's life, so no thread is made ahead (runner/thread_ahead.py).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from boss_agent.codexbin import app_server_output, codex_version
from boss_agent.codexversion import Version, at_least
from boss_agent.errors import AppServerUnavailable

logger = logging.getLogger(__name__)

CACHE_FILE = "codex-features.json"
# Measured: absent on 0.160, present on 0.169 (none of 0.161 … 0.168 was measured, so
# they get the fallback, which is right either way).
TOOL_CALL_ENV_SINCE: Version = (0, 169, 0)
TOOL_APPROVAL_META_SINCE: Version = (0, 169, 0)
IMMEDIATE_STEER_SINCE: Version = (0, 169, 0)
INTERRUPT_CLOSES_STREAM_SINCE: Version = (0, 160, 0)  # measured open on 0.150, closed on 0.160
# Measured: 0.150 keeps an unsubscribed thread loaded (12 s and more), 0.171 unloads it
# after thread_unload_delay_secs; nothing in between was measured, so it gets the fallback.
THREAD_UNLOAD_SINCE: Version = (0, 171, 0)

NEEDS_NO_FALLBACK = ("current_time_read",)  # a request codex may make, not a promise it keeps


@dataclass(frozen=True)
class CodexFeatures:
    version: str
    turn_tag: bool = True
    turns_list: bool = True
    settings_update: bool = True
    current_time_read: bool = False
    tool_call_env: bool = True
    tool_approval_meta: bool = True
    immediate_steer: bool = True
    interrupt_closes_stream: bool = True
    thread_unload: bool = True

    def names(self, present: bool = True) -> list[str]:
        """The features this codex has (``present``), or those it lacks that need a fallback."""
        return [f.name for f in fields(self) if f.name != "version" and getattr(self, f.name) is present
                and (present or f.name not in NEEDS_NO_FALLBACK)]


def describe_features(features: CodexFeatures) -> str:
    """One line for doctor: what this codex has, and what runs on a fallback."""
    missing = features.names(present=False)
    return f"features: {', '.join(features.names())}" + (f"; fallback for: {', '.join(missing)}" if missing else "")


def _methods(schema: dict[str, Any]) -> set[str]:
    names: set[str] = set()
    for variant in schema.get("oneOf", ()):
        method = variant.get("properties", {}).get("method", {})
        names.update(method.get("enum", []) or ([method["const"]] if "const" in method else []))
    return names


def from_schema(version: str, schema_dir: Path) -> CodexFeatures:
    """The feature set of ``version`` whose generated schema is in ``schema_dir``."""
    client = json.loads((schema_dir / "ClientRequest.json").read_text())
    requests = _methods(client)
    server = _methods(json.loads((schema_dir / "ServerRequest.json").read_text()))
    turn_start = client.get("definitions", {}).get("TurnStartParams", {}).get("properties", {})
    return CodexFeatures(
        version=version,
        turn_tag="clientUserMessageId" in turn_start,
        turns_list="thread/turns/list" in requests,
        settings_update="thread/settings/update" in requests,
        current_time_read="currentTime/read" in server,
        tool_call_env=at_least(version, TOOL_CALL_ENV_SINCE),
        tool_approval_meta=at_least(version, TOOL_APPROVAL_META_SINCE),
        immediate_steer=at_least(version, IMMEDIATE_STEER_SINCE),
        interrupt_closes_stream=at_least(version, INTERRUPT_CLOSES_STREAM_SINCE),
        thread_unload=at_least(version, THREAD_UNLOAD_SINCE),
    )


def _key(codex_bin: str, version: str) -> str:
    real = os.path.realpath(codex_bin)
    return f"{real}|{version}|{os.stat(real).st_mtime_ns}"


def _read_cache(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def detect(codex_bin: str, state_dir: Path, *, save: bool = True) -> CodexFeatures:
    """The features of the codex at ``codex_bin``: cached, else from its schema (~1 s).

    ``save=False`` (doctor, which changes nothing) reads the cache but never writes it.
    """
    version = codex_version(codex_bin)
    key, cache_path = _key(codex_bin, version), Path(state_dir) / CACHE_FILE
    cached = _read_cache(cache_path).get(key)
    # Written by a boss-agent that knew other features: detect again (no default guesses).
    if isinstance(cached, dict) and set(cached) == {f.name for f in fields(CodexFeatures)}:
        return CodexFeatures(**cached)
    with tempfile.TemporaryDirectory(prefix="boss-features-") as scratch:
        schema = Path(scratch) / "schema"
        app_server_output(codex_bin, ["generate-json-schema", "--experimental", "--out", str(schema)],
                          scratch)
        try:
            features = from_schema(version, schema)
        except (OSError, ValueError) as exc:
            raise AppServerUnavailable(f"codex {version} wrote no readable schema") from exc
    if not save:
        return features
    try:
        Path(state_dir).mkdir(parents=True, exist_ok=True, mode=0o700)
        # One entry: the codex in use. An old entry only names a binary that changed.
        cache_path.write_text(json.dumps({key: asdict(features)}, indent=1) + "\n")
    except OSError as exc:
        logger.info("codex features not cached (%s)", exc.__class__.__name__)
    return features
