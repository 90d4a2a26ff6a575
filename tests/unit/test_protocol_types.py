"""``appserver/protocol.py`` is exactly what the generator makes from the committed schema."""

from __future__ import annotations

import typing
from pathlib import Path

from boss_agent.appserver import protocol
from boss_agent.cli import protocol_types
from boss_agent.runner.approval_requests import APPROVAL_METHODS


def test_the_committed_protocol_module_is_the_generated_one(tmp_path: Path) -> None:
    out = tmp_path / "protocol.py"
    assert protocol_types.main([str(protocol_types.SNAPSHOT), str(out)]) == 0
    committed = Path(protocol.__file__).read_text()
    assert out.read_text() == committed, (
        "boss_agent/appserver/protocol.py is stale: run python -m boss_agent.cli.protocol_types")


def test_every_method_the_runner_reads_has_its_params_type() -> None:
    for method in protocol_types.RUNNER_METHODS | APPROVAL_METHODS:
        assert method in protocol.METHODS, method
    assert protocol.METHODS["turn/completed"] == "TurnCompletedNotification"


def test_only_the_methods_read_are_generated_not_the_whole_schema() -> None:
    for ignored in ("fuzzyFileSearch/sessionUpdated", "item/commandExecution/outputDelta"):
        assert ignored not in protocol.METHODS  # the reducer ignores them, the runner too
    assert not hasattr(protocol, "FuzzyFileSearchSessionUpdatedNotification")


def test_the_generated_types_resolve_and_keep_required_keys() -> None:
    hints = typing.get_type_hints(protocol.Turn)
    assert {"id", "status", "items"} <= protocol.Turn.__required_keys__
    assert "error" in protocol.Turn.__optional_keys__ and "error" in hints
    item = typing.get_type_hints(protocol.AgentMessageThreadItem)
    assert item["type"] == typing.Literal["agentMessage"]
    assert "startedAtMs" in protocol.AgentMessageThreadItem.__optional_keys__  # shared lifecycle times
