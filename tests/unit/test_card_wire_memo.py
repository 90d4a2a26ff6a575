"""The card's serializer reuses the wire form of unchanged records (``card._wire``).

Cards share every unchanged field from one message to the next, so ``to_dict`` builds
the sanitized form of a record or a tuple of records once per object. These pin what
that reuse must never change: each ``to_dict`` is a fresh object tree a caller may
edit, and a record seen under one workdir is relativized anew under another.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from boss_agent.progress.card import Branch, FileChange, Step, ToolActivity, new_card
from boss_agent.progress.reducer import reduce


def _mutate(value: Any) -> None:
    """Scribble over every dict and list of a serialized card, at every depth."""
    if isinstance(value, dict):
        for key, item in list(value.items()):
            _mutate(item)
            value[key] = "scribbled"
        value["added"] = True
    elif isinstance(value, list):
        for item in value:
            _mutate(item)
        value.append("scribbled")


def test_a_caller_editing_a_serialized_card_does_not_change_the_next_one() -> None:
    card = new_card(workdir="/srv/w").evolve(
        steps=(Step("plan /srv/w/a.py", "pending"),),
        toolActivities=(ToolActivity(1, "command", "pytest", "completed", "ran /srv/w/t"),),
        fileChanges=(FileChange("/srv/w/a.py", "update"),),
        branch=Branch(name="main", gitOperations=("commit", "push")),
    )
    first = card.to_dict()
    expected = copy.deepcopy(first)
    _mutate(first)
    assert card.to_dict() == expected
    # The next card shares those records: its form is the untouched one as well.
    later = reduce(card, {"method": "item/agentMessage/delta", "params": {"delta": "hi "}})
    second = later.to_dict()
    assert {k: v for k, v in second.items() if k not in ("answerPreview", "updatedAt")} == \
        {k: v for k, v in expected.items() if k not in ("answerPreview", "updatedAt")}


def test_the_same_records_under_another_workdir_are_relativized_for_that_workdir() -> None:
    steps = (Step("edit /srv/one/app.py", "pending"),)
    one = new_card(workdir="/srv/one").evolve(steps=steps).to_dict()
    two = new_card(workdir="/srv/two").evolve(steps=steps).to_dict()
    assert one["steps"][0]["title"] == "edit app.py"
    assert two["steps"][0]["title"] == "edit .../app.py"  # outside that workdir: name only
    assert "/srv/one" not in json.dumps(two)
