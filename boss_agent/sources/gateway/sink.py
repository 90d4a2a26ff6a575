"""One task's TaskSink on the gateway: card, answer and approvals become stream events.

The runner never waits on Redis: ``progress`` and ``answer_delta`` only append to an
outbox and wake the pump, which writes the outbox at most every
``COALESCE_INTERVAL_S`` (consecutive answer chunks merge, a newer card replaces an
unsent one), retrying through outages with the gateway's policy. ``request_approval``
sends the SDK's ask-user form, suspends the task (the execution marks it
WAITING_USER and acks its entry) and waits for a RESUME or a cancel.

Every form carries ``formId`` (the approval id). Only a RESUME naming the open,
unanswered form's ``formId`` can accept it. Without ``formId`` (a plain string, a
``reply_data`` with no ``formId``) a RESUME may only decline, cancel or answer a
user-input question, and only if the open form was published (its event's stream
entry id) before the RESUME's control-stream entry id: both ids come from the one
Redis clock, so a double tap or a client retry that arrives after the next form
appeared can never answer it, and nothing unnamed ever runs a command. A RESUME
naming another form, or any while no form is open, is dropped (the caller counts
it). When Codex stops waiting the form is announced withdrawn (``formStatus`` 2) and
RESUMEs for it are dropped.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import redis.asyncio as aioredis

from boss_agent.aio import race
from boss_agent.jsonshape import obj
from boss_agent.progress.card import Artifact, Card, answer_stream
from boss_agent.redact import StreamRedactor
from boss_agent.sources.gateway import keys, wire
from boss_agent.sources.gateway.retry import RedisRetry
from boss_agent.progress.approval_view import text_lines
from boss_agent.tasks import ApprovalRequest, SinkDefaults

logger = logging.getLogger(__name__)

# The SDK re-sets the 7-day TTL on every event; once a minute keeps the same expiry
# (to the minute) at half the commands. The first write of every publisher sets it.
EXPIRE_REFRESH_S = 60.0
COALESCE_INTERVAL_S = 0.25  # ≤4 card events a second per task: smooth on a phone, light on Redis
# What a RESUME without formId may still decide (never an accept: it would run what
# the person may never have seen).
UNNAMED_DECISIONS = frozenset({"decline", "cancel"})
_SUB_AGENT_TYPES = {wire.ANSWER_DELTA: wire.REASONING_LOG_DELTA, wire.FINAL_ANSWER: wire.REASONING_LOG_DELTA}


class Publisher:
    """Writes one task's events to its session's data stream (trimmed and expiring)."""

    def __init__(self, redis: aioredis.Redis, ctx: wire.EventContext, policy: RedisRetry,
                 sub_agent: bool) -> None:
        self.redis = redis
        self.ctx = ctx
        self.policy = policy
        self.sub_agent = sub_agent
        self.stream = keys.data_stream(ctx.session_id)
        self.written = 0
        self._expire_due = 0.0  # the first write always sets the TTL

    def _adapt(self, event: dict[str, Any]) -> dict[str, Any] | None:
        # A task called by another agent streams reasoning only; the caller owns the stream end.
        if not self.sub_agent:
            return event
        if event["event_type"] == wire.APP_STREAM_RESPONSE:
            return None
        event["event_type"] = _SUB_AGENT_TYPES.get(event["event_type"], event["event_type"])
        return event

    async def write(self, *events: dict[str, Any]) -> list[str | None]:
        """Write ``events``; their stream entry ids in order (None: not written, by design)."""
        adapted = [self._adapt(e) for e in events]
        batch = [e for e in adapted if e is not None]
        ids = iter(await self.policy.call("event write", self._write, batch) if batch else [])
        return [next(ids) if e is not None else None for e in adapted]

    async def _write(self, batch: list[dict[str, Any]]) -> list[str]:
        expire = time.monotonic() >= self._expire_due
        if len(batch) == 1 and not expire:  # the common streaming case: one round trip, one command
            ids = [await self.redis.xadd(self.stream, {"data": json.dumps(batch[0])},
                                         maxlen=keys.DATA_STREAM_MAXLEN, approximate=True)]
        else:
            pipe = self.redis.pipeline(transaction=False)
            for event in batch:
                pipe.xadd(self.stream, {"data": json.dumps(event)},
                          maxlen=keys.DATA_STREAM_MAXLEN, approximate=True)
            if expire:
                pipe.expire(self.stream, keys.SESSION_TTL_S)
            ids = (await pipe.execute())[:len(batch)]
        if expire:
            self._expire_due = time.monotonic() + EXPIRE_REFRESH_S
        self.written += len(batch)
        return [keys.text(entry_id) for entry_id in ids]


def artifact_names(card: Card) -> list[str]:
    """The card's artifact names as they go on the wire (sanitized)."""
    artifacts = card.to_dict()["artifacts"]
    return [a["name"] for a in artifacts if isinstance(a, dict) and isinstance(a.get("name"), str)]


def decision_of(resume: wire.Resume, request: ApprovalRequest) -> str | dict[str, Any]:
    """Map a RESUME onto the runner's answer. An unknown decision declines (safe default)."""
    reply = resume.reply_data
    if request.kind == "userInput":
        return {"answers": _answers(resume, request)}
    choice = resume.content
    if isinstance(reply, dict):
        choice = reply.get("decision")
    elif isinstance(reply, str):
        choice = reply
    if resume.status in ("CANCELLED", "FAILED"):
        choice = "cancel" if "cancel" in request.available_decisions else "decline"
    if choice not in request.available_decisions:
        return "decline"
    content = _form_content(reply, request) if choice == "accept" else None
    return {"decision": choice, "content": content} if content is not None else choice


def _form_content(reply: Any, request: ApprovalRequest) -> dict[str, Any] | None:
    """An accepted MCP form's fields: ``content``, or one value per fieldCode."""
    schema = request.details.get("schema")
    if request.kind != "elicitation" or not isinstance(schema, dict) or not isinstance(reply, dict):
        return None
    content = reply.get("content")
    if isinstance(content, dict):
        return content
    names = obj(schema.get("properties"))
    return {name: reply[name] for name in names if name in reply}


def _answers(resume: wire.Resume, request: ApprovalRequest) -> dict[str, list[str]]:
    """``{question id: [answers]}`` from ``answers``, one value per fieldCode, or plain text."""
    ids = [str(q.get("id")) for q in request.questions]
    reply = resume.reply_data
    if isinstance(reply, dict):
        answers = reply.get("answers")
        given: dict[str, Any] = answers if isinstance(answers, dict) else reply
        picked = {qid: given[qid] for qid in ids if qid in given}
        if not picked and len(ids) == 1 and "user_input" in given:
            picked = {ids[0]: given["user_input"]}
    else:
        text = reply if isinstance(reply, str) else resume.content
        picked = {ids[0]: text} if len(ids) == 1 and isinstance(text, str) and text else {}
    out: dict[str, list[str]] = {}
    for qid, value in picked.items():
        values = value if isinstance(value, list) else [value]
        texts = [v for v in values if isinstance(v, str)]
        if texts:
            out[qid] = texts
    return out


def ask_prompt(request: ApprovalRequest) -> str:
    """The form's text: what is asked (the whole §6 detail), why, and how to answer.

    Every part was sanitized where it was built (``approval_view``); sanitizing the text
    again would shorten the paths and cut the command the person consents to.
    """
    lines = text_lines({"summary": request.summary, "risk": request.risk, "detail": request.detail,
                        **request.details})
    lines.append(f"Reply with one of: {', '.join(request.available_decisions)}")
    return "\n".join(lines)


class GatewaySink(SinkDefaults):
    """TaskSink for one gateway task."""

    def __init__(self, publisher: Publisher, cancel: asyncio.Event,
                 on_suspend: Callable[[], Awaitable[None]],
                 on_resume: Callable[[bool], Awaitable[None]], workdir: str | None = None) -> None:
        self.publisher = publisher
        self.ctx = publisher.ctx
        self.cancel = cancel
        self._on_suspend = on_suspend
        self._on_resume = on_resume
        self._workdir = workdir
        self._outbox: list[tuple[str, Any]] = []
        self._wake = asyncio.Event()
        self._closed = False
        self._drain_lock = asyncio.Lock()
        self._approval_lock = asyncio.Lock()
        self._pending: tuple[ApprovalRequest, asyncio.Future[wire.Resume]] | None = None
        self._withdrawn: set[str] = set()  # forms already announced withdrawn
        self._published: dict[str, str] = {}  # form id -> the stream entry id of its open form
        self._explicit_answer = False
        self._own_stream: StreamRedactor | None = None  # answer_delta's stream
        self._stream_origin: object | None = None  # the card's answer stream being sent
        self._stream_sent = 0  # how much of it went out
        self._status: str | None = None
        self._artifacts: set[str] = set()
        self._artifact_records: tuple[Artifact, ...] = ()
        self.card: Card | None = None
        # Called with (thread, turn) when the turn starts, before clients learn the ids.
        self.on_turn: Callable[[str, str], Awaitable[None]] | None = None

    # --- TaskSink -------------------------------------------------------------------
    async def progress(self, card: Card) -> None:
        self.card = card
        if card.status != self._status:
            self._status = card.status
            self._push("event", wire.state_event(self.ctx, card.status))
        if card.artifacts is not self._artifact_records:  # rare: serialize only then
            self._artifact_records = card.artifacts
            for name in artifact_names(card):
                if name not in self._artifacts:
                    self._artifacts.add(name)
                    self._push("event", wire.artifact_event(self.ctx, name))
        # The answer stream is the card's answer through the streaming sanitizer: only
        # text that is final goes out, appended, never sent again. The whole card is
        # serialized only when the pump writes it (a newer card replaces it).
        if not self._explicit_answer:
            self._push_answer(self._stream_news(card))
        self._push("card", card)

    def _stream_news(self, card: Card) -> str:
        """What the card's answer stream let out since the last card."""
        stream = answer_stream(card)
        if stream is None:
            return ""
        if stream.origin is not self._stream_origin:  # the next agent message
            self._stream_origin, self._stream_sent = stream.origin, 0
        news = stream.sent - self._stream_sent
        if news <= 0:
            return ""
        self._stream_sent = stream.sent
        return stream.shown[-news:]  # ``shown`` holds at least the last call's output

    async def answer_delta(self, text: str) -> None:
        """Optional sink method: the runner streams answer text itself (preferred),
        through the same streaming sanitizer as the card's answer."""
        self._explicit_answer = True
        self._own_stream = (self._own_stream or StreamRedactor(self._workdir)).feed(text)
        self._push_answer(self._own_stream.out)

    async def turn_started(self, thread_ref: str, turn_id: str) -> None:
        """Optional sink method: the turn's ids, so a client can steer it while it runs."""
        if self.on_turn is not None:
            try:
                await self.on_turn(thread_ref, turn_id)
            except Exception as exc:  # noqa: BLE001 - routing is advisory; the turn goes on
                logger.warning("could not publish the running turn (%s)", type(exc).__name__)
        self._push("event", wire.state_event(self.ctx, "running", metadata={
            "codexThreadRef": thread_ref, "turnId": turn_id}))

    async def request_approval(self, request: ApprovalRequest) -> str | dict[str, Any]:
        async with self._approval_lock:  # one ask-user form open at a time per task
            future: asyncio.Future[wire.Resume] = asyncio.get_running_loop().create_future()
            self._pending = (request, future)
            # Record WAITING_USER before the form is even queued: the pump may write the
            # outbox at any moment, and whoever answers the form may check the record
            # (a RESUME may land on any worker of the agent type).
            await self._on_suspend()
            self._push("form", (request.approval_id, wire.ask_user_event(
                self.ctx, ask_prompt(request), request.approval_id, request.questions,
                request.details.get("schema"))))
            await self.flush()
            cancelled = False
            try:
                resume = await _first(future, self.cancel)
                cancelled = resume is None
            finally:
                self._pending = None
                await self._on_resume(cancelled)
            if resume is None:
                await self.withdraw_approval(request.approval_id, "cancelled")
                return "cancel" if "cancel" in request.available_decisions else "decline"
            return decision_of(resume, request)

    async def withdraw_approval(self, approval_id: str, reason: str) -> None:
        """Codex stopped waiting for this form: announce it withdrawn (once)."""
        if approval_id in self._withdrawn:
            return
        self._withdrawn.add(approval_id)
        self._push("event", wire.withdrawn_form_event(self.ctx, approval_id, reason))
        await self.flush()

    # --- driven by the execution ----------------------------------------------------
    @property
    def suspended(self) -> bool:
        return self._pending is not None

    def resume(self, command: wire.Resume, entry_id: str | None = None) -> str | None:
        """Answer the open ask-user form with ``command``: None when it did, else why it
        was dropped (the caller counts and logs it). ``entry_id``: the RESUME's
        control-stream entry id (None: unknown, so a RESUME without formId is dropped).
        """
        if self._pending is None or self._pending[1].done():
            return "no open form"
        request, future = self._pending
        reply = command.reply_data if isinstance(command.reply_data, dict) else {}
        form_id = reply.get("formId")
        if form_id is None:
            if not _unnamed_may_decide(decision_of(command, request)):
                return "no formId: it may not accept"
            published = self._published.get(request.approval_id)
            if published is None or entry_id is None or not _earlier(published, entry_id):
                return "no formId: sent before the open form was published"
        elif form_id != request.approval_id:
            return "names another form"
        future.set_result(command)
        return None

    async def pump(self) -> None:
        """Write the outbox until ``close``; coalesces bursts into one write per interval."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self.flush()
            except Exception as exc:  # noqa: BLE001 - retried already; drop, keep the task
                logger.warning("dropped task events after a Redis error (%s)", type(exc).__name__)
            if self._closed:
                return
            await asyncio.sleep(COALESCE_INTERVAL_S)

    def close(self) -> None:
        if self._own_stream is not None and not self._own_stream.done:
            self._own_stream = self._own_stream.finish()  # the held tail, now final
            self._push_answer(self._own_stream.out)
        self._closed = True
        self._wake.set()

    async def flush(self) -> None:
        async with self._drain_lock:  # pump and approval both flush; keep events in order
            batch, self._outbox = self._outbox, []
            events = [self._render(kind, value) for kind, value in batch]
            ids = await self.publisher.write(*events)
            for (kind, value), entry_id in zip(batch, ids, strict=True):
                if kind == "form" and entry_id is not None:
                    self._published[value[0]] = entry_id

    def _render(self, kind: str, value: Any) -> dict[str, Any]:
        if kind == "answer":
            return wire.event(self.ctx, wire.ANSWER_DELTA, value, wire.CT_TEXT)
        if kind == "card":
            return wire.card_event(self.ctx, value.to_dict())  # the newest card, serialized once
        if kind == "form":
            form: dict[str, Any] = value[1]
            return form
        event: dict[str, Any] = value  # already a rendered event
        return event

    def _push(self, kind: str, value: Any) -> None:
        if kind == "card":  # only the newest card matters
            self._outbox = [item for item in self._outbox if item[0] != "card"]
        self._outbox.append((kind, value))
        self._wake.set()

    def _push_answer(self, text: str) -> None:
        if not text:
            return
        if self._outbox and self._outbox[-1][0] == "answer":
            self._outbox[-1] = ("answer", self._outbox[-1][1] + text)
            self._wake.set()
        else:
            self._push("answer", text)


def _unnamed_may_decide(decision: str | dict[str, Any]) -> bool:
    """A RESUME without formId may decline, cancel, or answer questions; never accept."""
    if isinstance(decision, dict):
        return "answers" in decision
    return decision in UNNAMED_DECISIONS


def _earlier(first: str, second: str) -> bool:
    """Stream entry id ``first`` ("<ms>-<seq>") is before ``second`` (one Redis clock)."""
    def parts(entry_id: str) -> tuple[int, int]:
        ms, _, seq = entry_id.partition("-")
        return int(ms), int(seq or 0)

    try:
        return parts(first) < parts(second)
    except ValueError:
        return False


async def _first(future: asyncio.Future[wire.Resume], cancel: asyncio.Event) -> wire.Resume | None:
    """The RESUME, or None when the task is cancelled first."""
    resumed, _ = await race(future, cancel.wait())  # the future is the registry's: watched only
    return resumed.result() if resumed.done() and not resumed.cancelled() else None
