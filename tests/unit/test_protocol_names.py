"""The names the reducer and the runner compare against exist in codex's schema.

The card's tables are keyed by wire spellings (item types, review statuses, command
action kinds); a misspelt key would silently never match. These tests read the
allowed spellings from the generated ``appserver/protocol.py`` (codex's committed schema).
"""

from __future__ import annotations

import typing
from typing import Any, Literal, get_args, get_origin, is_typeddict

from boss_agent.appserver import protocol
from boss_agent.progress import approval_card, items
from boss_agent.runner import approval_requests


def spellings(shape: Any) -> set[object]:
    """Every literal a wire value of ``shape`` may be; a TypedDict variant gives its ``type``."""
    if get_origin(shape) is Literal:
        return set(get_args(shape))
    if is_typeddict(shape):
        tag = typing.get_type_hints(shape).get("type")
        return spellings(tag) if tag is not None else set()
    return set().union(*(spellings(arg) for arg in get_args(shape)))


def test_every_thread_item_type_is_classified_and_none_is_invented() -> None:
    assert set(items.ITEMS) == spellings(protocol.ThreadItem)


def test_the_card_tables_use_codex_spellings() -> None:
    assert set(approval_card._REVIEW_STATUS) == spellings(protocol.GuardianApprovalReviewStatus)
    assert set(approval_card._REVIEW_KIND) <= spellings(protocol.GuardianApprovalReviewAction)
    assert set(approval_card._RISK) == spellings(protocol.GuardianRiskLevel)
    assert set(items._WEB_ACTION) <= spellings(protocol.WebSearchAction)
    assert set(items._CHANGE) == spellings(protocol.PatchChangeKind)


def test_the_runner_offers_decisions_codex_accepts() -> None:
    assert set(approval_requests.DEFAULT_DECISIONS) <= spellings(protocol.CommandExecutionApprovalDecision)
    assert set(approval_requests.APPROVAL_METHODS) <= set(protocol.METHODS)
