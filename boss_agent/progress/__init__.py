"""The execution progress card (``executionProgress``): what a task is doing, safely.

* ``card``          the immutable, allow-listed card and its one sanitizing serializer
* ``reducer``       ``reduce(card, message)``: the method table over codex's protocol
* ``items``         ThreadItem types; ``notifications`` thread/account/model events
* ``approvals``     ``describe_approval`` and the approval entries
* ``boss_events``   the runner's own ``boss/*`` lifecycle events
* ``exec_events``   ``reduce_exec_event`` for ``codex exec --json``
* ``sanitize``      ``sanitize_text``, the one sanitizer every outgoing string passes
"""

from boss_agent.progress.approvals import describe_approval
from boss_agent.progress.card import Card, final_answer, new_card
from boss_agent.progress.reducer import reduce, reduce_exec_event

__all__ = ["Card", "describe_approval", "final_answer", "new_card", "reduce", "reduce_exec_event"]
