"""The by-framework wire format: commands in, events out, as plain JSON.

``parse_command`` turns one stream entry (``{b"data": b"<json>"}``) into a typed,
validated command or raises ``BadCommand``; nothing is ever unpickled. The event
builders produce exactly the dicts by-framework 0.2.1's ``GatewayDataEmitter``
writes (checked field by field in tests/peers/redis/test_gateway_wire.py), so Boss consumers
cannot tell the two apart.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from boss_agent.errors import BadCommand, TaskRejected
from boss_agent.sources.gateway.keys import StreamFields, agent_type_stream, check_id
from boss_agent.tasks import Task, parse_task

MAX_TEXT_CHARS = 1000  # user names, trace ids, reasons: labels, not documents
# A prompt at tasks.MAX_PROMPT_CHARS, JSON-escaped (6 bytes a char at worst), fits;
# anything bigger is not a command and is never handed to the JSON parser.
MAX_ENTRY_BYTES = 2 * 1024 * 1024

ASK_AGENT = "ASK_AGENT"
RESUME = "RESUME"
CANCEL_TASK = "CANCEL_TASK"

# Event types and content types (by_framework.core.protocol.event_type / content_type).
ANSWER_DELTA = "answerDelta"
REASONING_LOG_DELTA = "reasoningLogDelta"
FINAL_ANSWER = "finalAnswer"
APP_STREAM_RESPONSE = "appStreamResponse"
CT_TEXT = "1002"
CT_TASK = "2008"
CT_STATE = "3003"
CT_FILE = "3010"
CT_USER_INPUT = "3013"


@dataclass(frozen=True)
class Header:
    message_id: str
    session_id: str
    trace_id: str
    source_agent_type: str = ""
    target_agent_type: str = ""
    parent_message_id: str = ""
    task_group_id: str = ""
    user_code: str = ""
    user_name: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_wire(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


@dataclass(frozen=True)
class Ask:
    header: Header
    content: str | list[Any]
    extra_payload: dict[str, Any]

    def to_task(self) -> Task:
        """The device-API task: extra_payload carries its fields, content is the prompt."""
        raw = dict(self.extra_payload)
        raw.update(taskId=self.header.message_id, prompt=_prompt_of(self.content))
        return parse_task(raw)


@dataclass(frozen=True)
class Resume:
    header: Header
    content: Any
    status: str
    reply_data: Any
    extra_payload: dict[str, Any]


@dataclass(frozen=True)
class Cancel:
    header: Header
    target_message_id: str
    target_execution_id: str
    reason: str
    force: bool


Command = Ask | Resume | Cancel


def _prompt_of(content: str | list[Any]) -> str:
    if isinstance(content, str):
        return content
    parts = [m.get("content") for m in content if isinstance(m, dict)]
    text = "\n\n".join(p for p in parts if isinstance(p, str) and p.strip())
    if not text:
        raise TaskRejected("content has no text message")
    return text


def _label(raw: dict[str, Any], key: str) -> str:
    value = raw.get(key) or ""
    if not isinstance(value, str) or len(value) > MAX_TEXT_CHARS:
        raise BadCommand(f"header.{key} must be a short string")
    return value


def _optional_id(raw: dict[str, Any], key: str) -> str:
    value = raw.get(key) or ""
    return check_id(value, key) if value else ""


def parse_header(raw: Any) -> Header:
    if not isinstance(raw, dict):
        raise BadCommand("header must be an object")
    metadata = raw.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise BadCommand("header.metadata must be an object")
    return Header(
        message_id=check_id(raw.get("message_id"), "message_id"),
        session_id=check_id(raw.get("session_id"), "session_id"),
        trace_id=_label(raw, "trace_id") or uuid.uuid4().hex,
        source_agent_type=_optional_id(raw, "source_agent_type"),
        target_agent_type=_optional_id(raw, "target_agent_type"),
        parent_message_id=_optional_id(raw, "parent_message_id"),
        task_group_id=_label(raw, "task_group_id"),
        user_code=_label(raw, "user_code"),
        user_name=_label(raw, "user_name"),
        metadata=metadata,
    )


def _body(raw: dict[str, Any], header: Header | None) -> dict[str, Any]:
    body = raw.get("body")
    if not isinstance(body, dict):
        raise BadCommand("body must be an object", header)
    extra = body.get("extra_payload") or {}
    if not isinstance(extra, dict):
        raise BadCommand("body.extra_payload must be an object", header)
    return body


def entry_size(fields: Any) -> int:
    """The bytes of an entry's field names and values (what the size cap counts)."""
    if not isinstance(fields, dict):
        return 0
    return sum(len(k) + len(v) for k, v in fields.items()
               if isinstance(k, bytes | str) and isinstance(v, bytes | str))


def parse_command(fields: dict[Any, Any]) -> Command:
    """Parse one stream entry; raise BadCommand (with the header when it was valid).

    Only ``BadCommand`` is meant to come out, but the caller treats any exception as
    poison too: a parser deep inside ``json`` can still raise something unforeseen.
    """
    if entry_size(fields) > MAX_ENTRY_BYTES:
        raise BadCommand(f"entry is larger than {MAX_ENTRY_BYTES} bytes")
    data = fields.get(b"data", fields.get("data"))
    if data is None:
        raise BadCommand("entry has no data field")
    try:
        raw = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise BadCommand("data is not JSON (or nested too deeply)") from exc
    if not isinstance(raw, dict):
        raise BadCommand("a command must be a JSON object")
    header = parse_header(raw.get("header"))
    action = raw.get("action_type")
    # Only a bad ASK is reported on the session's stream: a bad RESUME or CANCEL names
    # someone else's task, which must not fail because of it.
    body = _body(raw, header if action == ASK_AGENT else None)
    if action == ASK_AGENT:
        content = body.get("content")
        if not isinstance(content, str | list):
            raise BadCommand("body.content must be a string or a message list", header)
        return Ask(header, content, dict(body.get("extra_payload") or {}))
    if action == RESUME:
        status = body.get("status") or ""
        if not isinstance(status, str):
            raise BadCommand("body.status must be a string")
        return Resume(header, body.get("content", ""), status, body.get("reply_data"),
                      dict(body.get("extra_payload") or {}))
    if action == CANCEL_TASK:
        target = check_id(body.get("target_message_id"), "target_message_id")
        execution = body.get("target_execution_id") or ""
        return Cancel(header, target, execution if isinstance(execution, str) else "",
                      _label(body, "reason"), body.get("cancel_mode") == "force")
    raise BadCommand("unknown action_type")


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class EventContext:
    """Who an event is from and about: one task's header, seen from this worker."""

    session_id: str
    trace_id: str
    agent_type: str
    message_id: str
    parent_message_id: str = ""


def event(
    ctx: EventContext,
    event_type: str,
    content: str | None,
    content_type: str,
    *,
    role: str | None = "assistant",
    state_msg: str = "",
    metadata: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One DataMessage dict, laid out like by-framework's DefaultSseLayoutBuilder."""
    data = {
        "id": uuid.uuid4().hex.upper(),
        "created": int(time.time()),
        "model": "",
        "object": "",
        "contentType": content_type,
        "agentId": ctx.agent_type or None,
        "orderId": ctx.message_id,
        "parentOrderId": ctx.parent_message_id,
        "choices": [{
            "index": 0,
            "finish_reason": "",
            "delta": {"role": role, "content": content, "function_call": None,
                      "function_response": None, "tool_calls": None, "tool_responses": None},
        }],
    }
    return {
        "trace_id": ctx.trace_id, "session_id": ctx.session_id, "event_type": event_type,
        "source_agent_type": ctx.agent_type, "message_id": ctx.message_id,
        "parent_message_id": ctx.parent_message_id, "timestamp": now_ms(), "data": data,
        "state_msg": state_msg, "artifact_url": "", "metadata": metadata or {},
    }


def state_event(ctx: EventContext, state: str, **kw: Any) -> dict[str, Any]:
    return event(ctx, REASONING_LOG_DELTA, state, CT_STATE, role=None, **kw)


def artifact_event(ctx: EventContext, url: str) -> dict[str, Any]:
    files = json.dumps([{"fileUrl": url}], ensure_ascii=False)
    return event(ctx, REASONING_LOG_DELTA, files, CT_FILE, role=None)


FORM_OPEN = 0
FORM_WITHDRAWN = 2  # boss-agent's: Codex stopped waiting; a RESUME for it is dropped


def ask_user_event(ctx: EventContext, prompt: str, form_id: str,
                   questions: tuple[dict[str, Any], ...] = (),
                   schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """The SDK's ask-user form: one textarea, one field per question of a userInput, or
    the decision plus one field per property of an MCP form (elicitation)."""
    if questions:
        fields = [_question_field(q) for q in questions]
    elif schema and isinstance(schema.get("properties"), dict):
        fields = [_decision_field(prompt)] + [_schema_field(name, spec)
                                              for name, spec in schema["properties"].items()]
    else:
        fields = [{"formType": "textarea", "fieldName": "user_input", "fieldCode": "user_input",
                   "description": prompt, "required": True}]
    form = {"formStatus": FORM_OPEN, "formId": form_id, "pluginMachineFields": fields}
    return event(ctx, REASONING_LOG_DELTA, json.dumps(form, ensure_ascii=False), CT_USER_INPUT)


def _question_field(question: dict[str, Any]) -> dict[str, Any]:
    field: dict[str, Any] = {
        "formType": "select" if question.get("options") else "textarea",
        "fieldName": question.get("header") or question.get("id"), "fieldCode": question.get("id"),
        "description": question.get("question") or "", "required": True}
    if question.get("options"):
        field["options"] = [{"label": o.get("label", ""), "description": o.get("description", "")}
                            for o in question["options"]]
        field["allowOther"] = bool(question.get("allowOther", True))
    if question.get("secret"):
        field["secret"] = True
    return field


def _decision_field(prompt: str) -> dict[str, Any]:
    return {"formType": "textarea", "fieldName": "decision", "fieldCode": "decision",
            "description": prompt, "required": True}


def _schema_field(name: str, spec: Any) -> dict[str, Any]:
    spec = spec if isinstance(spec, dict) else {}
    field: dict[str, Any] = {"formType": "select" if spec.get("enum") else "textarea",
                             "fieldName": spec.get("title") or name, "fieldCode": name,
                             "description": spec.get("description") or spec.get("title") or name,
                             "required": False}
    if isinstance(spec.get("enum"), list):
        field["options"] = [{"label": str(v), "description": ""} for v in spec["enum"]]
    return field


def withdrawn_form_event(ctx: EventContext, form_id: str, reason: str) -> dict[str, Any]:
    """The form ``form_id`` is no longer asked (Codex stopped waiting)."""
    form = {"formStatus": FORM_WITHDRAWN, "formId": form_id, "withdrawReason": reason,
            "pluginMachineFields": []}
    return event(ctx, REASONING_LOG_DELTA, json.dumps(form, ensure_ascii=False), CT_USER_INPUT)


def card_event(ctx: EventContext, card: dict[str, Any]) -> dict[str, Any]:
    return event(ctx, REASONING_LOG_DELTA, json.dumps(card, ensure_ascii=False), CT_TASK)


def reply_to_caller(header: Header, worker_agent_type: str, status: str, content: str,
                    reply_data: Any) -> tuple[str, StreamFields]:
    """The RESUME a sub-agent sends its caller: (caller's agent-type stream, entry)."""
    reply_header = Header(
        message_id=header.parent_message_id or f"msg-{uuid.uuid4().hex[:8]}",
        session_id=header.session_id, trace_id=header.trace_id,
        source_agent_type=worker_agent_type, target_agent_type=header.source_agent_type,
        parent_message_id=header.message_id, task_group_id=header.task_group_id,
        user_code=header.user_code, user_name=header.user_name, metadata=dict(header.metadata),
    )
    body = {"content": content, "status": status, "reply_data": reply_data}
    command = {"action_type": RESUME, "header": reply_header.to_wire(), "body": body}
    return agent_type_stream(header.source_agent_type), {"data": json.dumps(command)}
