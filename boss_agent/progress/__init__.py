"""The execution progress card (``executionProgress``): what a task is doing, safely.

* ``card``          the immutable, allow-listed card and its one sanitizing serializer
* ``answer``        the streamed answer kept bounded and previewed from its tail
* ``reducer``       ``reduce(card, message)``: the method table over codex's protocol
* ``items``         ThreadItem types; ``notifications`` thread/account/model events
* ``approval_card`` ``describe_approval`` and the approval entries
* ``boss_events``   the runner's own ``boss/*`` lifecycle events
* ``exec_events``   ``reduce_exec_event`` for ``codex exec --json``

Every string passes ``boss_agent.redact``, the one sanitizer all layers share.
"""

from boss_agent.progress.approval_card import describe_approval
from boss_agent.progress.card import Card, final_answer, new_card
from boss_agent.progress.reducer import reduce, reduce_exec_event

__all__ = ["Card", "describe_approval", "final_answer", "new_card", "reduce", "reduce_exec_event"]
