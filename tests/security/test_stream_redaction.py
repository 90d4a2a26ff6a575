"""Property: an answer streamed in pieces never lets a piece of a secret out.

Hypothesis builds answers with secrets of every kind the sanitizer knows (token
prefixes, JWTs, private-key blocks, passwords in URLs, quoted multi-word values after a
secret-like key, ``Authorization`` values, cookies), splits them into deltas (one
character per delta, and at generated split points), and feeds them through

* the shared streaming sanitizer (``StreamRedactor``);
* the card path: the real reducer and ``Card.to_dict`` after every delta (what a
  progress upload carries);
* the gateway path: ``GatewaySink.progress`` for every card, its ``answerDelta``
  events read from the outbox (what goes to the Redis session stream).

No output may hold 4 consecutive characters of a masked secret that the final masked
answer does not show anyway (a wrapper's own words can repeat inside a generated
secret), and the streamed text must be append-only: joined, it equals the final
masked answer.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from boss_agent.progress.card import Card, final_answer, new_card
from boss_agent.progress.reducer import reduce
from boss_agent.redact import MASK
from boss_agent.sources.gateway import wire
from boss_agent.sources.gateway.retry import RedisRetry
from boss_agent.sources.gateway.sink import GatewaySink, Publisher

FRAGMENT = 4  # this many consecutive characters of a masked secret count as a leak
MAX_EXAMPLES = 120  # each example streams its text several ways; sized to run in seconds
WORKDIR = "/srv/w"
ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
B64URL = ALNUM + "-_"
WORDS = st.text("abcdefghijklmnopqrstuvwxyz", min_size=4, max_size=9)


@dataclass(frozen=True)
class Answer:
    text: str
    secrets: tuple[str, ...]  # what the final answer masks: no piece of it may stream out


def alnum(lo: int, hi: int) -> st.SearchStrategy[str]:
    return st.text(ALNUM, min_size=lo, max_size=hi)


# (secret, how it sits in the text): every shape the sanitizer recognises by itself.
SHAPED = st.one_of(
    st.builds(lambda p, b: f"sk-{p}{b}", st.sampled_from(["", "proj-", "ant-", "live-"]), alnum(20, 32)),
    st.builds(lambda k, b: f"gh{k}_{b}", st.sampled_from("pousr"), alnum(36, 36)),
    st.builds(lambda b: f"github_pat_{b}", alnum(30, 40)),
    st.builds(lambda k, b: f"xox{k}-{b}", st.sampled_from("abprs"), alnum(20, 30)),
    st.builds(lambda b: f"AKIA{b}", st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", min_size=16, max_size=16)),
    st.builds(lambda h, p, s: f"eyJ{h}.eyJ{p}.{s}", st.text(B64URL, min_size=8, max_size=20),
              st.text(B64URL, min_size=16, max_size=30), st.text(B64URL, min_size=20, max_size=30)),
    st.builds(lambda b: f"sk_live_{b}", alnum(20, 30)),
    st.builds(lambda b: f"ya29.{b}", alnum(20, 30)),
    st.builds(lambda a, b: f"SG.{a}.{b}", alnum(16, 22), alnum(16, 22)),
    st.builds(lambda b: f"AIza{b}", alnum(24, 30)),
    st.builds(lambda b: f"glpat-{b}", alnum(20, 24)),
    st.builds(lambda b: f"npm_{b}", alnum(24, 30)),
    st.builds(lambda b: f"hf_{b}", alnum(24, 30)),
    st.builds(lambda b: f"xapp-1-{b}", alnum(20, 30)),
)
SHAPED_WRAPPERS = ["{s}", "the key is {s} here", '{{"note": "{s}"}}', "token_{s}", "export KEY={s}",
                   "- step: use {s}\n- done", "(`{s}`)"]
# Values only their key gives away; quoted ones may hold spaces.
KEYS = ["password", "api_key", "token", "client_secret", "Authorization", "x-api-key", "access_token"]
QUOTED_WRAPPERS = ['config: {{"{k}": "{v}"}}', "{{'{k}': '{v}'}}", '{k} = "{v}"', '{{\\"{k}\\": \\"{v}\\"}}']
BARE_WRAPPERS = ["{k}: {v}", "{k}={v} and more", "{k} :\n  {v}\n"]
AUTH_WRAPPERS = ["Authorization: Bearer {v}", '{{"Authorization": "Basic {v}"}}', "curl -H 'Authorization: {v}'"]
COOKIE_WRAPPERS = ["Cookie: session={v}; theme=dark", "Set-Cookie: sid={v}; Path=/"]


@st.composite
def secret_part(draw: st.DrawFn) -> tuple[str, str]:
    kind = draw(st.sampled_from(["shaped", "key", "url", "quoted", "bare", "auth", "cookie"]))
    if kind == "shaped":
        secret = draw(SHAPED)
        return draw(st.sampled_from(SHAPED_WRAPPERS)).format(s=secret), secret
    if kind == "key":
        body = draw(alnum(40, 90))
        lines = "\n".join(body[i:i + 32] for i in range(0, len(body), 32))
        label = draw(st.sampled_from(["", "RSA ", "OPENSSH "]))
        return (f"-----BEGIN {label}PRIVATE KEY-----\n{lines}\n-----END {label}PRIVATE KEY-----",
                body[:32])
    if kind == "url":
        secret = draw(alnum(12, 24))
        return f"clone https://deploy:{secret}@git.example.org/repo.git now", secret
    if kind == "quoted":
        secret = " ".join(draw(st.lists(WORDS, min_size=1, max_size=4)))
        return draw(st.sampled_from(QUOTED_WRAPPERS)).format(k=draw(st.sampled_from(KEYS)), v=secret), secret
    secret = draw(alnum(12, 24))
    wrappers = {"bare": BARE_WRAPPERS, "auth": AUTH_WRAPPERS, "cookie": COOKIE_WRAPPERS}[kind]
    return draw(st.sampled_from(wrappers)).format(k=draw(st.sampled_from(KEYS)), v=secret), secret


@st.composite
def answers(draw: st.DrawFn) -> Answer:
    glue = st.sampled_from(["", " ", "\n", "Done. ", "I checked:\n", " and then ", ", ", "\n\n- "])
    parts, secrets = [draw(glue)], []
    for _ in range(draw(st.integers(1, 3))):
        text, secret = draw(secret_part())
        parts += [text, draw(glue)]
        secrets.append(secret)
    return Answer("".join(parts) + draw(st.sampled_from(["", " Done.", "\n"])), tuple(secrets))


def splits(draw: st.DrawFn, text: str) -> list[str]:
    """The text cut at generated points (every point, for one in three examples)."""
    if draw(st.integers(0, 2)) == 0:
        return list(text)
    cuts = sorted(set(draw(st.lists(st.integers(0, len(text)), max_size=12))))
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if b > a]


def leaks(output: str, answer: Answer, final: str) -> list[str]:
    """Every 4-character piece of a masked secret in ``output`` that neither ``final``
    nor the uploads' and events' own words (``threadStatus``, ``agentId``) hold."""
    found = []
    for secret in answer.secrets:
        for i in range(len(secret) - FRAGMENT + 1):
            piece = secret[i:i + FRAGMENT]
            if piece in output and piece not in final and piece not in MASK and piece not in BOILERPLATE:
                found.append(piece)
    return found


def reference(text: str) -> str:
    """The final masked answer: what ``complete`` and ``finalAnswer`` carry."""
    card = reduce(new_card(workdir=WORKDIR), {"method": "item/completed", "params": {
        "threadId": "th", "turnId": "t", "item": {"type": "agentMessage", "id": "m", "text": text}}})
    return final_answer(card) or ""


def delta(text: str) -> dict[str, Any]:
    return {"method": "item/agentMessage/delta",
            "params": {"delta": text, "itemId": "m", "threadId": "th", "turnId": "t"}}


def started() -> Card:
    card = reduce(new_card(workdir=WORKDIR), {"method": "turn/started", "params": {
        "threadId": "th", "turn": {"id": "t", "status": "inProgress"}}})
    return reduce(card, {"method": "item/started", "params": {
        "threadId": "th", "turnId": "t", "item": {"type": "agentMessage", "id": "m", "text": ""}}})


def completed(card: Card, text: str) -> Card:
    card = reduce(card, {"method": "item/completed", "params": {
        "threadId": "th", "turnId": "t", "item": {"type": "agentMessage", "id": "m", "text": text}}})
    return reduce(card, {"method": "turn/completed", "params": {
        "threadId": "th", "turn": {"id": "t", "status": "completed"}}})


class GatewayOutbox:
    """The real sink, its outbox read directly (the e2e test covers the Redis round trip)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        async def noop(*_: Any) -> None:
            return None
        ctx = wire.EventContext("sess", "trace", "boss-agent", "msg-1")
        self.loop = loop
        self.sink = GatewaySink(Publisher(None, ctx, RedisRetry(), sub_agent=False),  # type: ignore[arg-type]
                                asyncio.Event(), noop, noop, workdir=WORKDIR)
        self.deltas: list[str] = []
        self.entries: list[str] = []

    def take(self) -> None:
        for kind, value in self.sink._outbox:
            event = self.sink._render(kind, value)
            # Random ids and clock readings are not text of the answer: blanked, so a
            # "0000" in a generated secret cannot meet one by chance.
            plain = {**event, "timestamp": 0, "data": {**event["data"], "id": "", "created": 0}}
            self.entries.append(json.dumps(plain))
            if event["event_type"] == wire.ANSWER_DELTA:
                self.deltas.append(event["data"]["choices"][0]["delta"]["content"])
        self.sink._outbox.clear()

    def progress(self, card: Card) -> None:
        self.loop.run_until_complete(self.sink.progress(card))
        self.take()

    def answer_delta(self, text: str) -> None:
        self.loop.run_until_complete(self.sink.answer_delta(text))
        self.take()

    def close(self) -> None:
        self.sink.close()
        self.take()


def _boilerplate() -> str:
    ctx = wire.EventContext("sess", "trace", "boss-agent", "msg-1")
    card = completed(started(), "")
    return json.dumps([card.to_dict(), wire.event(ctx, wire.ANSWER_DELTA, "", wire.CT_TEXT),
                       wire.card_event(ctx, card.to_dict()), wire.state_event(ctx, "running")])


BOILERPLATE = _boilerplate()


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    try:
        yield loop
    finally:
        loop.close()


SETTINGS = settings(max_examples=MAX_EXAMPLES, derandomize=True, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@SETTINGS
@given(answer=answers(), data=st.data())
def test_the_streaming_sanitizer_emits_only_final_text(answer: Answer, data: st.DataObject) -> None:
    from boss_agent.redact import StreamRedactor

    final = reference(answer.text)
    stream, emitted = StreamRedactor(workdir=WORKDIR), []
    for piece in data.draw(st.composite(splits)(answer.text)):
        stream = stream.feed(piece)
        emitted.append(stream.out)
        assert not leaks("".join(emitted), answer, final), (answer.text, emitted)
    stream = stream.finish()
    emitted.append(stream.out)
    assert "".join(emitted) == final, (answer.text, emitted)


@SETTINGS
@given(answer=answers(), data=st.data())
def test_the_card_preview_never_shows_a_piece_of_a_streamed_secret(answer: Answer, data: st.DataObject,
                                                                   loop: asyncio.AbstractEventLoop) -> None:
    final = reference(answer.text)
    card, gateway = started(), GatewayOutbox(loop)
    for piece in data.draw(st.composite(splits)(answer.text)):
        card = reduce(card, delta(piece))
        upload = json.dumps(card.to_dict(), ensure_ascii=False)
        assert not leaks(upload, answer, final), (answer.text, upload)
        preview = card.to_dict()["answerPreview"] or ""
        assert final.startswith(preview), (answer.text, preview)  # shown text is final text
        gateway.progress(card)
        assert not leaks("\n".join(gateway.entries), answer, final), (answer.text, gateway.entries)
    card = completed(card, answer.text)
    gateway.progress(card)
    gateway.close()
    assert (card.to_dict()["answerPreview"] or "") == final
    assert "".join(gateway.deltas) == final, (answer.text, gateway.deltas)  # append-only, never re-sent


@SETTINGS
@given(answer=answers(), data=st.data())
def test_the_gateway_answer_stream_never_shows_a_piece_of_a_streamed_secret(
        answer: Answer, data: st.DataObject, loop: asyncio.AbstractEventLoop) -> None:
    """The runner's own answer stream (``answer_delta``) goes through the same class."""
    final = reference(answer.text)
    gateway = GatewayOutbox(loop)
    for piece in data.draw(st.composite(splits)(answer.text)):
        gateway.answer_delta(piece)
        assert not leaks("\n".join(gateway.entries), answer, final), (answer.text, gateway.entries)
    gateway.close()
    assert "".join(gateway.deltas) == final, (answer.text, gateway.deltas)


def test_the_password_example_streamed_in_words_is_never_shown_in_part(loop: asyncio.AbstractEventLoop) -> None:
    text = 'config: {"password": "correct horse battery staple"}'
    answer = Answer(text, ("correct horse battery staple",))
    final = reference(text)
    assert final == f'config: {{"password": "{MASK}"}}'
    card, gateway = started(), GatewayOutbox(loop)
    for piece in ('config: {"password": "correct', " horse", " battery", ' staple"}'):
        card = reduce(card, delta(piece))
        assert not leaks(json.dumps(card.to_dict()), answer, final), card.to_dict()["answerPreview"]
        gateway.progress(card)
    card = completed(card, text)
    gateway.progress(card)
    gateway.close()
    assert not leaks("\n".join(gateway.entries), answer, final), gateway.deltas
    assert "".join(gateway.deltas) == final, gateway.deltas


def feed_all(text: str, size: int) -> tuple[str, str]:
    """What a stream let out before ``finish`` and with it, ``text`` fed ``size`` chars at a time."""
    from boss_agent.redact import StreamRedactor

    stream, before = StreamRedactor(), []
    for i in range(0, len(text), size):
        stream = stream.feed(text[i:i + size])
        before.append(stream.out)
    return "".join(before), stream.finish().out


@pytest.mark.parametrize("opened", [
    '{"password": "' + "word " * 2000,  # a quoted value that never closes on its line
    "curl -d " + "QUJD" * 2500,  # one 10 KB run without a blank
])
def test_a_held_tail_past_the_bound_goes_out_masked_and_the_stream_flows_on(opened: str) -> None:
    from boss_agent.redact import STREAM_HOLD_CHARS

    assert len(opened) > STREAM_HOLD_CHARS
    before, rest = feed_all(opened + " and on", 3)  # the line has not ended: the mask went out anyway
    assert before.endswith(MASK) and "word" not in rest and "QUJD" not in rest, before[:200]
    before, rest = feed_all(opened + '"} end\nthe next line ', 3)
    assert before.endswith(f"{MASK}\nthe next line"), before[:200]  # the next line flows as it comes
    assert "word" not in before + rest and "QUJD" not in before + rest


def test_a_key_block_longer_than_the_bound_is_dropped_to_its_end_line() -> None:
    from boss_agent.redact import STREAM_HOLD_CHARS

    body = "\n".join(["Qk9" * 21] * 130)
    block = f"-----BEGIN RSA PRIVATE KEY-----\n{body}\n-----END RSA PRIVATE KEY-----"
    assert len(block) > STREAM_HOLD_CHARS
    before, rest = feed_all(f"key: {block}\nDone here. ", 7)
    assert "Qk9" not in before + rest
    assert before == f"key: {MASK}\nDone here."


@pytest.mark.parametrize(("method", "extra", "field"), [
    ("item/reasoning/summaryTextDelta", {"summaryIndex": 0, "itemId": "r"}, ("reasoningSummary", "text")),
    ("thread/realtime/transcript/delta", {}, ("realtime", "transcriptPreview")),
])
def test_the_reasoning_summary_and_the_transcript_hold_back_a_secret_as_the_answer_does(method, extra, field):
    """They are not streams a reader appends (each upload shows them anew), but an upload
    shows only their part that no later delta can change the masking of."""
    answer = Answer('config: {"password": "correct horse battery staple"}', ("correct horse battery staple",))
    final = reference(answer.text)
    card = reduce(started(), {"method": "thread/realtime/started", "params": {"threadId": "th"}})
    for piece in ('config: {"password": "correct', " horse", " battery", ' staple"}', " ok"):
        card = reduce(card, {"method": method, "params": {"delta": piece, "threadId": "th", "turnId": "t", **extra}})
        shown = card.to_dict()[field[0]][field[1]]
        assert not leaks(shown, answer, final), shown
    assert shown.startswith(final), shown
