"""The router adopts sub-agent threads only from the methods that can name one.

``Router.notification`` runs listeners' adoption rules for ``ADOPTING_METHODS`` only
(an answer delta no longer visits every listener's rules). These pin that each way a
thread becomes a listener's still works, and that a delta is still delivered to the
thread it belongs to and to no other. In-process: the routing is pure bookkeeping
(tests/peers/codex/test_approvals_routing.py drives it against real codex).
"""

from __future__ import annotations

from typing import Any

from boss_agent.appserver.routing import Notification, Router, ThreadListener


def _note(method: str, **params: Any) -> Notification:
    return Notification(method, params, {"method": method, "params": params})


def _drain(listener: ThreadListener) -> list[tuple[str, Any]]:
    out = []
    while not listener._queue.empty():
        item = listener._queue.get_nowait()
        assert isinstance(item, Notification)
        out.append((item.method, item.params.get("threadId")))
    return out


def test_every_adopting_method_still_routes_the_new_thread() -> None:
    router = Router()
    mine, other = ThreadListener({"root"}), ThreadListener({"elsewhere"})
    router.add(mine)
    router.add(other)
    router.notification(_note("thread/started", thread={"id": "forked", "parentThreadId": "root"}))
    router.notification(_note("turn/started", threadId="root", turn={"id": "turn-1"}))
    router.notification(_note("turn/started", threadId="spawned", turn={"id": "t2", "rootTurnId": "turn-1"}))
    router.notification(_note("item/completed", threadId="root",
                              item={"type": "collabAgentToolCall", "receiverThreadIds": ["helper"]}))
    for thread in ("forked", "spawned", "helper"):
        assert mine.routes(thread) and not other.routes(thread)
    _drain(mine)
    _drain(other)
    for thread in ("root", "forked", "spawned", "helper"):
        router.notification(_note("item/agentMessage/delta", threadId=thread, delta="x"))
    assert _drain(mine) == [("item/agentMessage/delta", t) for t in ("root", "forked", "spawned", "helper")]
    assert _drain(other) == []


def test_a_delta_naming_a_parent_does_not_adopt_anything() -> None:
    router = Router()
    listener = ThreadListener({"root"})
    router.add(listener)
    router.notification(_note("item/agentMessage/delta", threadId="stranger",
                              thread={"id": "stranger", "parentThreadId": "root"}))
    assert not listener.routes("stranger")
