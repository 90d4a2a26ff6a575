"""Where a RESUME or a CANCEL_TASK goes, given where its task lives.

A RESUME arrives on the agent-type stream (any worker may read it) or on a worker's
own stream. The worker holding the suspended task answers it; any other worker
forwards it to the holder's stream while the holder's lease is alive. A task
suspended on a worker that is gone can never resume (its Codex turn died with it):
it is reported FAILED ``agent_restarted`` and its stream closed.

A RESUME answers a form only in the task's own session (the ``session_id`` of the
ASK that created the task) and only by the rules of ``GatewaySink.resume``; any other
is dropped: acked, counted ``resume_dropped`` and logged once at info, with the
reason and never the payload.

A CANCEL_TASK sets the task's cancel event (a suspended task wakes up, declines
its open approval and ends CANCELLED). A cancel that arrives while the ASK is still
being claimed is remembered and applied the moment the task exists.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from boss_agent.errors import BadCommand
from boss_agent.sources.gateway import keys, wire
from boss_agent.sources.gateway.execution import SOURCE, Entry, Reporter, Shared
from boss_agent.lifecycles import TERMINAL_EXECUTION, ExecutionStatus
from boss_agent.sources.gateway.registry import worker_online
from boss_agent.sources.inflight import RunRegistry

logger = logging.getLogger(__name__)


def _task_header(record: dict[str, Any], session_id: str, message_id: str) -> wire.Header:
    """The original task's header, rebuilt from its execution record (ids re-checked)."""
    return wire.parse_header({
        "message_id": message_id, "session_id": session_id,
        "trace_id": record.get("trace_id") or "",
        "source_agent_type": record.get("caller_agent_type") or "",
        "target_agent_type": record.get("target_agent_type") or "",
        "parent_message_id": record.get("parent_message_id") or ""})


async def _close_lost_task(shared: Shared, record: dict[str, Any], session_id: str, message_id: str,
                           status: str, reason: str) -> None:
    try:
        header = _task_header(record, session_id, message_id)
    except BadCommand:
        logger.warning("execution record with invalid ids left alone")
        return
    reporter = Reporter(shared, header, None, str(record.get("execution_id") or "") or None)
    if status == ExecutionStatus.FAILED:
        await reporter.finish(status, code="agent_restarted",
                              message="the worker holding this task stopped; it cannot resume")
    else:
        await reporter.finish(status, reason=reason)


async def route_resume(runs: RunRegistry, shared: Shared, command: wire.Resume,
                       entry: Entry) -> None:
    header = command.header
    run = runs.get(SOURCE, header.message_id)
    if run is not None:
        if header.session_id != run.owner.ask.header.session_id:
            _drop(shared, "it is not from the task's own session")
        elif (why := run.owner.sink.resume(command, entry.entry_id)) is not None:
            # A double tap, a client retry, or an answer to a withdrawn form: never the next one.
            _drop(shared, why)
        await shared.ack(entry)
        return
    record = await shared.records.find(header.session_id, header.message_id, "WAITING_USER") or {}
    owner = str(record.get("worker_id") or "")
    if not record:
        _drop(shared, "no task of that session is suspended")
    elif owner and owner != shared.worker_id and await worker_online(shared.redis, owner):
        payload: keys.StreamFields = {"data": json.dumps(_command_dict(command))}
        await shared.policy.call("forward", shared.redis.xadd, keys.worker_stream(owner), payload)
        shared.stats["forwarded"] += 1
    else:
        await _close_lost_task(shared, record, header.session_id, header.message_id, "FAILED", "")
    await shared.ack(entry)


def _drop(shared: Shared, why: str) -> None:
    logger.info("RESUME dropped: %s", why)  # never the payload: it may carry answers
    shared.stats["resume_dropped"] += 1


def _command_dict(command: wire.Resume) -> dict[str, Any]:
    body = {"content": command.content, "status": command.status, "reply_data": command.reply_data}
    if command.extra_payload:
        body["extra_payload"] = command.extra_payload
    return {"action_type": wire.RESUME, "header": command.header.to_wire(), "body": body}


async def route_cancel(runs: RunRegistry, shared: Shared, command: wire.Cancel,
                       entry: Entry) -> None:
    target = command.target_message_id
    session_id = command.header.session_id
    # A running task is cancelled; one still starting gets the cancel the moment it runs.
    if not runs.cancel(SOURCE, target, command.reason, command.force):
        record = await shared.records.get(session_id, target) or {}
        # Ours by record but not in this process: an earlier process with our id held it.
        if record.get("worker_id") == shared.worker_id and record.get("status") not in TERMINAL_EXECUTION:
            await _close_lost_task(shared, record, session_id, target, "CANCELLED",
                                   command.reason or "cancelled")
    shared.stats["cancel_requests"] += 1
    await shared.ack(entry)
