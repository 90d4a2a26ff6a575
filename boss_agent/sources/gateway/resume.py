"""Where a RESUME or a CANCEL_TASK goes, given where its task lives.

A RESUME arrives on the agent-type stream (any worker may read it) or on a worker's
own stream. The worker holding the suspended task answers it; any other worker
forwards it to the holder's stream while the holder's lease is alive. A task
suspended on a worker that is gone can never resume (its Codex turn died with it):
it is reported FAILED ``agent_restarted`` and its stream closed.

A CANCEL_TASK sets the task's cancel event (a suspended task wakes up, declines
its open approval and ends CANCELLED). A cancel that arrives while the ASK is still
being claimed is remembered and applied the moment the task exists.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from boss_agent.errors import BadCommand
from boss_agent.sources.gateway import keys, wire
from boss_agent.sources.gateway.execution import Entry, Reporter
from boss_agent.sources.gateway.registry import TERMINAL, worker_online

if TYPE_CHECKING:
    from boss_agent.sources.gateway.gateway import Gateway

logger = logging.getLogger(__name__)


def _task_header(record: dict[str, Any], session_id: str, message_id: str) -> wire.Header:
    """The original task's header, rebuilt from its execution record (ids re-checked)."""
    return wire.parse_header({
        "message_id": message_id, "session_id": session_id,
        "trace_id": record.get("trace_id") or "",
        "source_agent_type": record.get("caller_agent_type") or "",
        "target_agent_type": record.get("target_agent_type") or "",
        "parent_message_id": record.get("parent_message_id") or ""})


async def _close_lost_task(gw: Gateway, record: dict[str, Any], session_id: str, message_id: str,
                           status: str, reason: str) -> None:
    try:
        header = _task_header(record, session_id, message_id)
    except BadCommand:
        logger.warning("execution record with invalid ids left alone")
        return
    reporter = Reporter(gw.shared, header, None, str(record.get("execution_id") or "") or None)
    if status == "FAILED":
        await reporter.finish(status, code="agent_restarted",
                              message="the worker holding this task stopped; it cannot resume")
    else:
        await reporter.finish(status, reason=reason)


async def route_resume(gw: Gateway, command: wire.Resume, entry: Entry) -> None:
    header = command.header
    execution = gw.executions.get(header.message_id)
    if execution is not None:
        if not execution.sink.resume(command):
            # A double tap, a client retry, or an answer to a withdrawn form: never the next one.
            logger.warning("RESUME for a form that is not open; dropped")
            gw.shared.stats["resume_dropped"] += 1
        await gw.shared.ack(entry)
        return
    record = await gw.shared.records.find(header.session_id, header.message_id, "WAITING_USER") or {}
    owner = str(record.get("worker_id") or "")
    if not record:
        logger.warning("RESUME for a task that is not suspended; dropped")
    elif owner and owner != gw.worker_id and await worker_online(gw.redis, owner):
        payload: keys.StreamFields = {"data": json.dumps(_command_dict(command))}
        await gw.shared.policy.call("forward", gw.redis.xadd, keys.worker_stream(owner), payload)
        gw.shared.stats["forwarded"] += 1
    else:
        await _close_lost_task(gw, record, header.session_id, header.message_id, "FAILED", "")
    await gw.shared.ack(entry)


def _command_dict(command: wire.Resume) -> dict[str, Any]:
    body = {"content": command.content, "status": command.status, "reply_data": command.reply_data}
    if command.extra_payload:
        body["extra_payload"] = command.extra_payload
    return {"action_type": wire.RESUME, "header": command.header.to_wire(), "body": body}


async def route_cancel(gw: Gateway, command: wire.Cancel, entry: Entry) -> None:
    target = command.target_message_id
    session_id = command.header.session_id
    execution = gw.executions.get(target)
    if execution is not None:
        execution.request_cancel(command.reason, command.force)
    elif target in gw._starting:
        gw._early_cancels[target] = (command.reason, command.force)
    else:
        record = await gw.shared.records.get(session_id, target) or {}
        # Ours by record but not in this process: an earlier process with our id held it.
        if record.get("worker_id") == gw.worker_id and record.get("status") not in TERMINAL:
            await _close_lost_task(gw, record, session_id, target, "CANCELLED",
                                   command.reason or "cancelled")
    gw.shared.stats["cancel_requests"] += 1
    await gw.shared.ack(entry)
