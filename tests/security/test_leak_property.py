"""Property: a generated secret in a generated wrapper never leaves the device.

Hypothesis plants secrets (``sk-``, ``ghp_``, ``github_pat_``, ``xox…``, AWS ``AKIA``,
JWTs, private-key blocks, passwords in URLs, and opaque values that only their key
gives away: ``Authorization``, ``api_key``, ``password``, ``token``, ``secret``,
cookies) in wrappers (prose, JSON, escaped JSON, headers, Python dicts), sometimes with
invisible characters inserted and compatibility forms. Each text then goes through
the real code that ships strings off the device:

* streamed as answer, reasoning-summary and realtime-transcript deltas split at every
  offset, through the real reducer and card serializer after every delta;
* the gateway's events for every card (``GatewaySink.progress`` and ``wire.py``'s
  builders; its outbox is read directly instead of a Redis round trip, which the
  gateway tests cover);
* the completion body (``final_answer`` into ``TaskResult.to_wire``), a warning;
* log lines from our loggers and a third-party one (``aiohttp``).

Nothing may contain 12 consecutive characters of the secret's random part, even after
the output is NFKC-normalised and its invisible characters are dropped (a phone shows
``sk\u00ad-…`` as ``sk-…``). The seed is fixed and the examples are sized to run in well
under a minute.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import io
import json
import logging
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from boss_agent.logs import OURS, remove_handlers, setup_logging
from boss_agent.progress.card import Card, final_answer, new_card
from boss_agent.progress.reducer import reduce
from boss_agent.sources.gateway import wire
from boss_agent.sources.gateway.retry import RedisRetry
from boss_agent.sources.gateway.sink import GatewaySink, Publisher
from boss_agent.tasks import TaskResult

WINDOW = 12  # this many consecutive characters of a secret's random part count as a leak
MAX_EXAMPLES = 150  # enough to hit every gap of the unfixed sanitizer; see the report in the module doc
ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
B64URL = ALNUM + "-_"
INVISIBLE = ["\u00ad", "\u200b", "\u200d", "\u2060", "\u2066", "\u2069", "\u202e", "\ufeff", "\ufe0f",
             "\U000e0101", "\U000e0041", "\u034f", "\u061c", "\u180e"]


@dataclass(frozen=True)
class Planted:
    text: str  # what the model (or a library) wrote
    core: str  # the random part that must never come out
    start: int  # where the secret (with any invisible characters inserted) lies in text
    end: int


def _boilerplate() -> str:
    """Text the outputs hold anyway. Hypothesis draws string constants from the code it
    tests, so a generated "secret" can contain ``reasoningLogDelta``; such a body is
    skipped rather than reported as a leak."""
    from boss_agent import logs, redact, tasks
    from boss_agent.progress import card, items, notifications, reducer
    from boss_agent.sources.gateway import sink

    modules = (logs, redact, tasks, card, items, notifications, reducer, sink, wire)
    return "\n".join(inspect.getsource(m) for m in modules) + Path(__file__).read_text()


BOILERPLATE = _boilerplate()


def body(alphabet: str, lo: int, hi: int) -> st.SearchStrategy[str]:
    return st.text(alphabet, min_size=lo, max_size=hi).filter(
        lambda b: not any(b[i:i + WINDOW] in BOILERPLATE for i in range(max(1, len(b) - WINDOW + 1))))


# Secrets that give themselves away by their shape.
SHAPED = st.one_of(
    st.builds(lambda p, b: (f"sk-{p}{b}", b), st.sampled_from(["", "proj-", "ant-api03-", "live-"]),
              body(ALNUM, 20, 40)),
    st.builds(lambda b: (f"ghp_{b}", b), body(ALNUM, 36, 36)),
    st.builds(lambda b: (f"github_pat_{b}", b), body(ALNUM + "_", 30, 60)),
    st.builds(lambda k, b: (f"xox{k}-{b}", b), st.sampled_from("abprs"), body(ALNUM + "-", 20, 40)),
    st.builds(lambda b: (f"AKIA{b}", b), body("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16, 16)),
    st.builds(lambda h, p, s: (f"eyJ{h}.eyJ{p}.{s}", p + "." + s),
              body(B64URL, 10, 30), body(B64URL, 16, 40), body(B64URL, 20, 43)),
    st.builds(lambda kind, b: (f"-----BEGIN {kind}PRIVATE KEY-----\n{b}\n-----END {kind}PRIVATE KEY-----", b),
              st.sampled_from(["", "RSA ", "OPENSSH ", "EC "]), body(ALNUM + "+/", 40, 120)),
    st.builds(lambda u, b, host: (f"https://{u}:{b}@{host}/repo.git", b),
              st.sampled_from(["git", "deploy", "x-access-token"]), body(ALNUM, 14, 30),
              st.sampled_from(["github.com", "db.internal:5432", "example.org"])),
)
SHAPED_WRAPPERS = [
    "{s}", "the key is {s} here", '{{"note": "{s}"}}', '{{\\"note\\": \\"{s}\\"}}', "X-Debug: {s}",
    "export OPENAI_KEY='{s}'", "Cookie: theme=dark; k={s}", "- step: use {s}\n- done",
]
# Opaque values: only the key next to them says they are secret.
OPAQUE_KEYS = ["Authorization", "authorization", "api_key", "apiKey", "password", "token", "secret",
               "client_secret", "access_token", "x-api-key"]
OPAQUE_WRAPPERS = [
    "{k}: {v}", "{k}={v}", '{{"{k}": "{v}"}}', '{{"{k}":"{v}"}}', '{{\\"{k}\\": \\"{v}\\"}}',
    '"{{\\"{k}\\":\\"{v}\\"}}"', "{{'{k}': '{v}'}}", '{k} = "{v}"',
]
AUTH_WRAPPERS = [
    "Authorization: Bearer {v}", "Authorization: Basic {v}", '{{"Authorization": "Bearer {v}"}}',
    '{{\\"Authorization\\": \\"Basic {v}\\"}}', "proxy-authorization: {v}", '{{"headers": {{"Authorization": "{v}"}}}}',
]
COOKIE_WRAPPERS = [
    "Cookie: session={v}", "Cookie: theme=dark; sid={v}; lang=en", "Set-Cookie: sid={v}; Path=/; HttpOnly",
    '{{"Cookie": "sid={v}"}}', '{{\\"set-cookie\\": \\"id={v}; Secure\\"}}',
]


@st.composite
def planted(draw: st.DrawFn) -> Planted:
    kind = draw(st.sampled_from(["shaped", "opaque", "auth", "cookie"]))
    if kind == "shaped":
        secret, core = draw(SHAPED)
        text = draw(st.sampled_from(SHAPED_WRAPPERS)).format(s=secret)
    else:
        core = draw(body(ALNUM, 16, 32))
        secret = core
        wrappers = {"opaque": OPAQUE_WRAPPERS, "auth": AUTH_WRAPPERS, "cookie": COOKIE_WRAPPERS}[kind]
        text = draw(st.sampled_from(wrappers)).format(k=draw(st.sampled_from(OPAQUE_KEYS)), v=secret)
    start = text.index(secret)
    end = start + len(secret)
    for _ in range(draw(st.integers(0, 2))):  # invisible characters inside the secret
        at = draw(st.integers(start, end))
        text = text[:at] + draw(st.sampled_from(INVISIBLE)) + text[at:]
        end += 1
    prefix = draw(st.sampled_from(["", "Done. ", "I checked the config:\n", "Result → "]))
    suffix = draw(st.sampled_from(["", " and that was it.", "\n"]))
    return Planted(prefix + text + suffix, core, len(prefix) + start, len(prefix) + end)


def visible(text: str) -> str:
    text = "".join(c for c in text if unicodedata.category(c) not in ("Cf", "Mn"))
    return unicodedata.normalize("NFKC", text)


def assert_clean(where: str, output: Any, core: str) -> None:
    text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
    shown = text + "\n" + visible(text) + "\n" + visible(json.loads(json.dumps(text)))
    for i in range(max(1, len(core) - WINDOW + 1)):
        piece = core[i:i + WINDOW]
        assert piece not in shown, f"{where} leaked {piece!r}: {text[:600]!r}"


class Harness:
    """The real reducer, card serializer, gateway sink and logging, driven synchronously."""

    def __init__(self, log_file: Path, stderr: io.StringIO) -> None:
        self.loop = asyncio.new_event_loop()
        self.log_file = log_file
        self.stderr = stderr
        self.log_seen = 0
        self.ctx = wire.EventContext("sess", "trace", "boss-agent", "msg-1")

    def sink(self) -> GatewaySink:
        async def noop(*_: Any) -> None:
            return None
        publisher = Publisher(None, self.ctx, RedisRetry(), sub_agent=False)  # type: ignore[arg-type]
        return GatewaySink(publisher, asyncio.Event(), noop, noop)

    def events(self, sink: GatewaySink, card: Card) -> list[dict[str, Any]]:
        self.loop.run_until_complete(sink.progress(card))
        out = [sink._render(kind, value) for kind, value in sink._outbox]
        sink._outbox.clear()
        return out

    def stream(self, method: str, text: str, cut: int, extra: dict[str, Any], core: str, tail: str = "") -> None:
        card = reduce(new_card(workdir="/srv/w"),
                      {"method": "turn/started", "params": {"threadId": "th", "turn": {"id": "t",
                                                                                        "status": "inProgress"}}})
        sink = self.sink()
        for delta in (text[:cut], text[cut:], tail):
            if not delta:
                continue
            card = reduce(card, {"method": method, "params": {"delta": delta, **extra}})
            shown = card.to_dict()
            assert_clean(f"{method} card", shown, core)
            if method == "item/agentMessage/delta":  # the sink turns answer previews into deltas
                assert_clean(f"{method} gateway", self.events(sink, card), core)

    def new_log_lines(self) -> str:
        with self.log_file.open(encoding="utf-8") as handle:
            handle.seek(self.log_seen)
            text = handle.read()
            self.log_seen = handle.tell()
        return text + self.stderr.getvalue()


@contextlib.contextmanager
def only_our_handlers(stderr: io.StringIO) -> Iterator[None]:
    """As in the daemon: only setup_logging's handlers on the root logger (pytest's own
    would catch what a misrouted record hands to the root) and stderr readable (where
    logging's last-resort handler writes a record nobody handled)."""
    root = logging.getLogger()
    saved = root.handlers[:]
    root.handlers[:] = [h for h in saved if getattr(h, OURS, False)]
    try:
        with contextlib.redirect_stderr(stderr):
            yield
    finally:
        root.handlers[:] = saved


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    setup_logging("info", tmp_path / "logs", json_lines=True)
    harness = Harness(tmp_path / "logs" / "boss-agent.log", io.StringIO())
    try:
        yield harness
    finally:
        harness.loop.close()
        remove_handlers()


@settings(max_examples=MAX_EXAMPLES, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(planted(), st.integers(0, 200))
def test_a_planted_secret_never_leaves_the_device(harness: Harness, plant: Planted, filler: int) -> None:
    text, core = plant.text, plant.core
    # Every split point of two deltas that falls in the secret or its key (a cut
    # elsewhere shows all of the secret or none of it, which the ends cover).
    for cut in sorted({0, len(text), *range(max(0, plant.start - 16), plant.end + 1)}):
        harness.stream("item/agentMessage/delta", text, cut, {"itemId": "m", "threadId": "th", "turnId": "t"}, core)
        harness.stream("item/reasoning/summaryTextDelta", text, cut,
                       {"itemId": "r", "threadId": "th", "turnId": "t", "summaryIndex": 0}, core)
        # Trailing filler moves the 200-char preview cut across the text.
        harness.stream("thread/realtime/transcript/delta", text, cut, {"threadId": "th"}, core, " " + "x" * filler)

    card = new_card(workdir="/srv/w")
    card = reduce(card, {"method": "item/completed", "params": {
        "threadId": "th", "turnId": "t", "item": {"type": "agentMessage", "id": "m", "text": text}}})
    card = reduce(card, {"method": "warning", "params": {"message": text}})
    card = reduce(card, {"method": "thread/realtime/transcript/done", "params": {"text": text + " " + "x" * filler}})
    assert_clean("final card", card.to_dict(), core)
    result = TaskResult("completed", "app_server", result_text=final_answer(card), error_code="failed",
                        error_message=None, execution_progress=card.to_dict())
    assert_clean("completion", result.to_wire(), core)

    with only_our_handlers(harness.stderr):
        logging.getLogger("boss_agent.runner").info("model said: %s", text)
        logging.getLogger("boss_agent.runner").warning(text)
        logging.getLogger("aiohttp.client").warning("request failed: %s", text)
    assert_clean("log line", harness.new_log_lines(), core)
