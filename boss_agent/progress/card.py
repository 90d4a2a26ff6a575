"""The execution progress card: its allow-listed fields and its one serializer.

A ``Card`` is immutable. It holds only the fields docs/progress-card.md names (plus a
few private bookkeeping values the reducer needs: the workdir, hashed correlation keys,
the count of ignored methods). Correlation keys are ``hash()``es of codex ids, so no
thread, turn, item or request id is ever stored, let alone serialized.

``to_dict`` and ``__repr__`` are the only ways out, and both pass every string through
``sanitize_text`` on the way: a secret that slipped into an allowed field (a plan step,
a warning, the agent's answer) is masked, and absolute paths become workdir-relative.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from functools import lru_cache
from typing import Any

from boss_agent.errors import UnknownCardField
from boss_agent.lifecycles import TASK, TERMINAL
from boss_agent.progress.answer import PREVIEW_CONTEXT, clean_answer
from boss_agent.progress.bounds import CARD_BUDGET_BYTES, COUNTED, fit_wire, wire_size
from boss_agent.redact import StreamRedactor, sanitize_text, settled_prefix
from boss_agent.timefmt import utc_iso

CARD_VERSION = 1
ANSWER_PREVIEW_CHARS = 500  # the card shows the tail of the answer; the full text is resultText
FIELD_CHARS = 300  # any other string on the card is a label or a one-line summary
GOAL_CHARS = 500  # a goal is one objective, longer than a label
REASONING_CHARS = 1000  # a reasoning summary is a few sentences; more is noise on a phone
TRANSCRIPT_PREVIEW_CHARS = 200  # docs/progress-card.md: realtime transcriptPreview ≤ 200 chars
TRANSCRIPT_WINDOW_CHARS = TRANSCRIPT_PREVIEW_CHARS + PREVIEW_CONTEXT  # what the card keeps of it
SANITIZE_CACHE = 4096  # labels and summaries repeat across uploads; sanitize each once
# A sanitized string takes at most this many bytes per char on the wire (a \uXXXX escape).
WIRE_BYTES_PER_CHAR = 6
ENTRY_OVERHEAD_BYTES = 80  # keys, quotes and braces of one list entry
# Every field of the card but its lists, at their longest: the goal, the reasoning, the
# answer preview, the realtime preview and sixty labels (the git operations among them).
SCALAR_BOUND_BYTES = (GOAL_CHARS + REASONING_CHARS + ANSWER_PREVIEW_CHARS + TRANSCRIPT_PREVIEW_CHARS
                      + 60 * FIELD_CHARS) * WIRE_BYTES_PER_CHAR
# How many strings one entry of each list holds (each at most FIELD_CHARS long).
_ENTRY_STRINGS = {"steps": 2, "approvals": 5, "fileChanges": 2, "toolActivities": 4,
                  "backgroundAgents": 3, "threadCollaboration": 4, "mcpServers": 3,
                  "warnings": 2, "artifacts": 2}
_ENTRY_BOUND = {name: count * FIELD_CHARS * WIRE_BYTES_PER_CHAR + ENTRY_OVERHEAD_BYTES
                for name, count in _ENTRY_STRINGS.items()}


def key_of(value: object) -> int | None:
    """An opaque correlation key for a codex id: the id itself never enters the card."""
    if value is None or isinstance(value, bool):
        return None
    return hash(("boss-card", str(value)))


@dataclass(frozen=True, slots=True)
class Step:
    title: str
    status: str


@dataclass(frozen=True, slots=True)
class ThreadStatus:
    state: str
    waitingOnApproval: bool = False  # noqa: N815 - wire names, serialized as they are
    waitingOnUserInput: bool = False  # noqa: N815


@dataclass(frozen=True, slots=True)
class Realtime:
    state: str
    transcriptPreview: str = ""  # noqa: N815
    transcriptChunks: int = 0  # noqa: N815
    audioChunks: int = 0  # noqa: N815
    closeReason: str | None = None  # noqa: N815
    error: str | None = None
    # transcriptPreview holds the raw tail with room before it (TRANSCRIPT_WINDOW_CHARS),
    # masked and cut only when serialized; ``streaming`` until transcript/done says it is whole.
    streaming: bool = False


@dataclass(frozen=True, slots=True)
class Goal:
    text: str
    status: str


@dataclass(frozen=True, slots=True)
class Settings:
    model: str | None
    provider: str | None
    approvalPolicy: str | None  # noqa: N815
    sandbox: str | None
    collaborationMode: str | None  # noqa: N815
    reasoningEffort: str | None  # noqa: N815


@dataclass(frozen=True, slots=True)
class Compaction:
    count: int
    lastAt: str | int | None  # noqa: N815


@dataclass(frozen=True, slots=True)
class Collaboration:
    key: int | None
    tool: str
    status: str
    targetKind: str  # noqa: N815
    agentStatus: str | None  # noqa: N815


@dataclass(frozen=True, slots=True)
class ToolActivity:
    key: int | None
    kind: str
    name: str
    status: str
    summary: str


@dataclass(frozen=True, slots=True)
class Reasoning:
    text: str
    status: str


@dataclass(frozen=True, slots=True)
class Account:
    planType: str | None = None  # noqa: N815
    rateLimited: bool = False  # noqa: N815
    primaryUsedPercent: float | None = None  # noqa: N815
    resetsAt: str | None = None  # noqa: N815


@dataclass(frozen=True, slots=True)
class Verification:
    status: str
    message: str


@dataclass(frozen=True, slots=True)
class Route:
    from_: str
    to: str
    reason: str | None


@dataclass(frozen=True, slots=True)
class TokenUsage:
    inputTokens: int = 0  # noqa: N815
    cachedInputTokens: int = 0  # noqa: N815
    outputTokens: int = 0  # noqa: N815
    reasoningOutputTokens: int = 0  # noqa: N815
    totalTokens: int = 0  # noqa: N815
    contextWindow: int | None = None  # noqa: N815


@dataclass(frozen=True, slots=True)
class McpServer:
    name: str
    status: str
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Notice:
    kind: str
    message: str


@dataclass(frozen=True, slots=True)
class Approval:
    id: str
    kind: str
    status: str
    risk: str
    summary: str
    request_key: int | None = None
    item_key: int | None = None
    resolved: bool = False  # codex said the request is settled; the decision may come later


@dataclass(frozen=True, slots=True)
class FileChange:
    path: str
    change: str
    item_key: int | None = None


@dataclass(frozen=True, slots=True)
class Branch:
    name: str | None = None
    changedFiles: int = 0  # noqa: N815
    insertions: int = 0
    deletions: int = 0
    gitOperations: tuple[str, ...] = ()  # noqa: N815
    githubCli: str | None = None  # noqa: N815


@dataclass(frozen=True, slots=True)
class Artifact:
    name: str
    kind: str


@dataclass(frozen=True, slots=True)
class BackgroundAgent:
    key: int | None
    name: str
    status: str
    source: str


_new = object.__new__
_set = object.__setattr__  # a frozen dataclass refuses its own __setattr__

# Record fields that are bookkeeping, never part of the wire shape.
_PRIVATE = frozenset({"key", "request_key", "item_key", "resolved", "streaming"})
_RENAMED = {"from_": "from"}


@dataclass(frozen=True)
class Card:
    """One task's progress card. Build with ``new_card``, evolve with the reducer."""

    status: str = "queued"
    backend: str = "app_server"
    startedAt: str | int | None = None  # noqa: N815 - ISO, or emittedAtMs until serialized
    updatedAt: str | int | None = None  # noqa: N815
    completedAt: str | int | None = None  # noqa: N815
    steps: tuple[Step, ...] = ()
    threadStatus: ThreadStatus | None = None  # noqa: N815
    realtime: Realtime | None = None
    threadGoal: Goal | None = None  # noqa: N815
    threadSettings: Settings | None = None  # noqa: N815
    compaction: Compaction | None = None
    threadCollaboration: tuple[Collaboration, ...] = ()  # noqa: N815
    toolActivities: tuple[ToolActivity, ...] = ()  # noqa: N815
    reasoningSummary: Reasoning | None = None  # noqa: N815
    accountStatus: Account | None = None  # noqa: N815
    modelVerification: Verification | None = None  # noqa: N815
    modelRoute: Route | None = None  # noqa: N815
    tokenUsage: TokenUsage | None = None  # noqa: N815
    mcpServers: tuple[McpServer, ...] = ()  # noqa: N815
    remoteControl: str | None = None  # noqa: N815
    warnings: tuple[Notice, ...] = ()
    approvals: tuple[Approval, ...] = ()
    fileChanges: tuple[FileChange, ...] = ()  # noqa: N815
    branch: Branch | None = None
    artifacts: tuple[Artifact, ...] = ()
    backgroundAgents: tuple[BackgroundAgent, ...] = ()  # noqa: N815
    # ---- private: never serialized
    answer: str = field(default="", repr=False)  # the agent message being streamed
    # ``answer`` through the streaming sanitizer: what of it may be shown (answerPreview,
    # the gateway's answer stream) while it streams; a new stream per agent message.
    answer_stream: StreamRedactor | None = field(default=None, repr=False)
    final_text: str | None = field(default=None, repr=False)  # the last completed answer
    workdir: str | None = field(default=None, repr=False)
    ignored_count: int = field(default=0, repr=False)  # methods this reducer does not know
    unknown_methods: tuple[str, ...] = field(default=(), repr=False)
    open_items: tuple[tuple[int, str], ...] = field(default=(), repr=False)  # (key, type)
    turn_key: int | None = field(default=None, repr=False)
    diff_base: tuple[int, int, int] = field(default=(0, 0, 0), repr=False)  # earlier turns
    compacted_turns: frozenset[int] = field(default=frozenset(), repr=False)
    # How many entries each capped list left out (bounds.py); serialized as ``omitted``.
    omitted: tuple[tuple[str, int], ...] = field(default=(), repr=False)

    def omitted_count(self, name: str) -> int:
        return next((n for key, n in self.omitted if key == name), 0)

    def with_omitted(self, name: str, more: int, **changes: Any) -> Card:
        """``evolve(**changes)``, with ``more`` entries of list ``name`` left out."""
        if more:
            counts = dict(self.omitted)
            counts[name] = counts.get(name, 0) + more
            changes["omitted"] = tuple(counts.items())
        return self.evolve(**changes)

    def evolve(self, **changes: Any) -> Card:
        """A copy with ``changes``; much cheaper than ``dataclasses.replace`` per message.

        A field the card does not have raises ``UnknownCardField`` (a typo would
        otherwise be stored, never serialized, and go unnoticed)."""
        if not _FIELD_NAMES.issuperset(changes):
            raise UnknownCardField(sorted(set(changes) - _FIELD_NAMES))
        if "status" in changes and changes["status"] != self.status:
            TASK.check(self.status, changes["status"])  # an impossible card is a bug: raise
        # A copy of the state dict handed over whole: half the cost of filling the new
        # instance's own dict key by key, and this runs for every message of a turn.
        state = self.__dict__.copy()
        state.update(changes)
        new = _new(Card)
        _set(new, "__dict__", state)
        return new

    def streamed(self, answer: str, delta: str, at: str | int | None) -> Card:
        """``evolve(answer=answer, updatedAt=at)`` and ``delta`` fed to the answer's
        stream, for the hot path, an answer delta: no status can change, so no keyword
        dict and no transition check."""
        state = self.__dict__.copy()
        state["answer"] = answer
        stream = self.answer_stream
        state["answer_stream"] = (stream or StreamRedactor(self.workdir)).feed(delta)
        state["updatedAt"] = at
        new = _new(Card)
        _set(new, "__dict__", state)
        return new

    def to_dict(self) -> dict[str, Any]:
        """The ``executionProgress`` JSON object, every string sanitized."""
        out: dict[str, Any] = {"version": CARD_VERSION}
        for name in _public_fields():
            out[name] = _plain(getattr(self, name), self.workdir)
        if self.threadGoal is not None:
            goal = out["threadGoal"]
            goal["text"] = _clean(self.threadGoal.text, self.workdir, GOAL_CHARS)
        for name in ("startedAt", "updatedAt", "completedAt"):
            out[name] = iso(getattr(self, name))
        if self.compaction is not None:
            out["compaction"]["lastAt"] = iso(self.compaction.lastAt)
        out["remoteControl"] = None if self.remoteControl is None else {"status": out["remoteControl"]}
        out["answerPreview"] = answer_preview(self)
        if self.reasoningSummary is not None:
            out["reasoningSummary"]["text"] = reasoning_text(self)
        if self.realtime is not None:
            out["realtime"]["transcriptPreview"] = transcript_preview(self.realtime, self.workdir)
        counts = dict(self.omitted)
        out["omitted"] = {name: counts.pop(name, 0) for name in COUNTED} | counts
        # The byte guard costs one more encoding, so it runs only for a card that could
        # be too big: most cannot, by their lists' lengths or else by their lists' bytes.
        if size_bound(self) > CARD_BUDGET_BYTES and self._list_bytes() > CARD_BUDGET_BYTES:
            out = fit_wire(out)
        return out

    def _list_bytes(self) -> int:
        """An upper bound of the serialized bytes: the lists' own (measured once per
        list object, like their wire form) and the rest at its longest."""
        return SCALAR_BOUND_BYTES + sum(_wire_bytes(getattr(self, name), self.workdir)
                                        for name in _ENTRY_BOUND)

    def __repr__(self) -> str:
        return "Card(" + json.dumps(self.to_dict(), ensure_ascii=False, sort_keys=True) + ")"


_FIELD_NAMES = frozenset(f.name for f in fields(Card))  # what ``evolve`` may set


def size_bound(card: Card) -> int:
    """An upper bound of the card's serialized bytes, from its lists' lengths alone."""
    return SCALAR_BOUND_BYTES + sum(len(getattr(card, name)) * bound for name, bound in _ENTRY_BOUND.items())


@lru_cache(maxsize=1)
def _public_fields() -> tuple[str, ...]:
    """The serialized fields, in order (``dataclasses.fields`` per upload is not free)."""
    return tuple(f.name for f in fields(Card) if f.repr)


def iso(value: Any) -> str | None:
    """Timestamps are kept as codex's ``emittedAtMs`` (cheap) and rendered here."""
    if isinstance(value, int) and not isinstance(value, bool):
        return utc_iso(value / 1000, ms=True)
    return _clean(value, None, 40) if isinstance(value, str) else None


@lru_cache(maxsize=SANITIZE_CACHE)
def _clean(value: str, workdir: str | None, limit: int = FIELD_CHARS) -> str:
    return sanitize_text(value, workdir=workdir, limit=limit)


# The wire form of records and tuples of records, by identity. Cards are immutable and
# ``evolve`` shares every unchanged field, so from one upload to the next the same tuple
# object comes back: looking it up by ``id`` skips hashing (a frozen dataclass hashes all
# its fields, recursively) and rebuilding it. Each entry holds its value, so its ``id``
# cannot be reused by another object while the entry lives.
_WIRE: dict[int, tuple[Any, str | None, Any, bool]] = {}
_WIRE_BYTES: dict[int, tuple[Any, str | None, int]] = {}  # the same, for a list's encoded size


def _wire_bytes(value: tuple[Any, ...], workdir: str | None) -> int:
    """The encoded size of a list's wire form, measured once per list object."""
    if not value:
        return 2
    hit = _WIRE_BYTES.get(id(value))
    if hit is not None and hit[0] is value and hit[1] == workdir:
        return hit[2]
    size = wire_size(_wire(value, workdir)[0])
    if len(_WIRE_BYTES) >= SANITIZE_CACHE:
        _WIRE_BYTES.clear()
    _WIRE_BYTES[id(value)] = (value, workdir, size)
    return size


def _wire(value: Any, workdir: str | None) -> tuple[Any, bool]:
    """The sanitized wire form of a record or a tuple, built once per object, and
    whether it is flat (a dict of scalars, or a list of scalars and such dicts)."""
    hit = _WIRE.get(id(value))
    if hit is not None and hit[0] is value and hit[1] == workdir:
        return hit[2], hit[3]
    if isinstance(value, tuple):
        wire: Any = [_plain(v, workdir) for v in value]
        flat = all(type(v) is not list and (type(v) is not dict or _is_flat(v)) for v in wire)
    else:
        wire = {_RENAMED.get(name, name): _plain(getattr(value, name), workdir)
                for name in value.__slots__ if name not in _PRIVATE}
        flat = _is_flat(wire)
    if len(_WIRE) >= SANITIZE_CACHE:
        _WIRE.clear()  # cheaper than LRU bookkeeping; the live cards refill it in one upload
    _WIRE[id(value)] = (value, workdir, wire, flat)
    return wire, flat


def _is_flat(record: dict[str, Any]) -> bool:
    return not any(type(v) in (list, dict) for v in record.values())


def _fresh(wire: Any) -> Any:
    """A deep copy of a cached wire form's lists and dicts: callers may change it."""
    if type(wire) is list:
        return [_fresh(v) for v in wire]
    if type(wire) is dict:
        return {k: _fresh(v) for k, v in wire.items()}
    return wire


def _plain(value: Any, workdir: str | None) -> Any:
    """Records to dicts, tuples to lists, every string through the sanitizer."""
    if type(value) is str or isinstance(value, str):
        return _clean(value, workdir)
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if type(value) is tuple and not value:
        return []
    # Fresh dicts (and lists) every time: callers may change what they get.
    wire, flat = _wire(value, workdir)
    if not flat:
        return _fresh(wire)
    if type(wire) is dict:
        return wire.copy()
    return [v.copy() if type(v) is dict else v for v in wire]


def answer_preview(card: Card) -> str | None:
    """While the task runs, the tail of what the answer's stream let out (a secret
    still arriving is held back there); once it ended, the tail of the final answer."""
    if card.status not in TERMINAL and card.answer_stream is not None:
        return card.answer_stream.preview(ANSWER_PREVIEW_CHARS)
    text = card.answer or card.final_text
    if not text:
        return None
    return clean_answer(text, workdir=card.workdir, limit=ANSWER_PREVIEW_CHARS) or None


def answer_stream(card: Card) -> StreamRedactor | None:
    """The answer's stream, finished once the task ended (nothing more will come)."""
    stream = card.answer_stream
    if stream is not None and card.status in TERMINAL and not stream.done:
        return stream.finish()
    return stream


def reasoning_text(card: Card) -> str:
    """The reasoning summary; while it streams, without its half-arrived last word
    (the same hold-back as the answer: a secret never leaves in pieces)."""
    assert card.reasoningSummary is not None
    text = card.reasoningSummary.text
    if card.reasoningSummary.status == "inProgress" and card.status not in TERMINAL:
        text = settled_prefix(text)
    return _clean(text, card.workdir, REASONING_CHARS)


def transcript_preview(realtime: Realtime, workdir: str | None) -> str:
    """The transcript's last ``TRANSCRIPT_PREVIEW_CHARS``, masked first and cut after.

    The kept window starts ``PREVIEW_CONTEXT`` chars earlier, so a key cut off by the
    preview (``Autho|rization: v``) is still whole when the masking runs.
    """
    text = settled_prefix(realtime.transcriptPreview) if realtime.streaming else realtime.transcriptPreview
    return sanitize_text(text, workdir=workdir, limit=TRANSCRIPT_PREVIEW_CHARS, tail=True)


def final_answer(card: Card) -> str | None:
    """The full last agent message (sanitized, envelopes stripped), for ``resultText``."""
    text = card.final_text or card.answer
    if not text:
        return None
    return clean_answer(text, workdir=card.workdir, limit=None) or None


def new_card(*, backend: str = "app_server", workdir: str | None = None,
             now: str | None = None) -> Card:
    """A queued card. ``workdir`` is remembered (never serialized) to relativize paths."""
    return Card(backend=backend, workdir=str(workdir) if workdir else None, updatedAt=now)
