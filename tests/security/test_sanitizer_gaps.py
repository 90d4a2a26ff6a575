"""The sanitizer's gaps found from outside: each one a string that used to leave unmasked.

Every case runs through the real entry points: ``sanitize_text`` (card fields, errors,
gateway events), the card reducer and serializer (streamed answer, reasoning summary,
realtime transcript) and the logging set-up (every library's records).
"""

from __future__ import annotations

import json
import logging
import unicodedata
from pathlib import Path

import pytest

from boss_agent.logs import remove_handlers, setup_logging
from boss_agent.progress.card import new_card
from boss_agent.progress.reducer import reduce
from boss_agent.redact import MASK, sanitize_text

TOKEN = "Zq7Xw2Lm9Rt4Vb8Nc1Kd"  # an opaque credential: no known prefix, only its key gives it away


@pytest.mark.parametrize("text", [
    f'{{"Authorization": "Basic {TOKEN}"}}',
    f'{{"authorization":"{TOKEN}"}}',
    f'{{"api_key": "{TOKEN}"}}',
    f'{{"password": "{TOKEN} and more"}}',
    f'{{\\"password\\": \\"{TOKEN}\\"}}',
    f'"{{\\"api_key\\":\\"{TOKEN}\\"}}"',
    f'{{\\"Authorization\\": \\"Bearer {TOKEN}\\"}}',
    f"{{'secret': '{TOKEN}'}}",
    f'client_secret="{TOKEN}"',
    f'{{"token": "a\\"b{TOKEN}"}}',
    # Cookie headers: every name=value pair of the header.
    f"Cookie: session={TOKEN}; theme=dark",
    f"Set-Cookie: sid={TOKEN}; Path=/; HttpOnly",
    f'{{"headers": {{"Cookie": "sid={TOKEN}"}}}}',
    f"set-cookie:id={TOKEN}",
])
def test_json_escaped_json_and_cookie_values_are_masked(text):
    out = sanitize_text(text, limit=None)
    assert TOKEN not in out and MASK in out, out


INVISIBLES = ["\u00ad", "\u2066", "\u2069", "\u200b", "\u2060", "\ufe0f", "\U000e0101", "\u034f", "\u061c",
              "\U000e0041"]


@pytest.mark.parametrize("mark", INVISIBLES, ids=[f"U+{ord(c):04X}" for c in INVISIBLES])
@pytest.mark.parametrize("secret", ["sk-proj-abcdefghijklmnop1234", "ghp_" + "a1B2" * 9, "AKIAABCDEFGHIJKLMNOP"])
def test_secrets_broken_by_invisible_characters_are_masked(mark, secret):
    broken = secret[:3] + mark + secret[3:9] + mark + secret[9:]
    out = sanitize_text(f"key {broken} end", limit=None)
    visible = "".join(c for c in out if unicodedata.category(c) not in ("Cf", "Mn"))
    assert secret not in visible and secret[9:] not in visible and MASK in out, ascii(out)


def test_compatibility_forms_are_normalised_before_matching():
    fullwidth = "ｓｋ－ｐｒｏｊ－ａｂｃｄｅｆｇｈｉｊｋｌｍｎｏｐ"
    out = sanitize_text(f"key {fullwidth}", limit=None)
    assert "abcdefghijklmnop" not in unicodedata.normalize("NFKC", out) and MASK in out


def test_every_format_character_is_dropped():
    cf = [chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) == "Cf"]
    out = sanitize_text("a" + "".join(cf) + "b", limit=None)
    assert out == "ab", [f"U+{ord(c):04X}" for c in out]


def test_the_realtime_transcript_is_masked_before_it_is_cut():
    # The 200-char cut used to fall inside the key ("Autho|rization: …"), so the value
    # it named was no longer recognised.
    filler = "x" * 169
    card = new_card()
    for delta in ("Authorization: ", TOKEN, " " + filler):
        card = reduce(card, {"method": "thread/realtime/transcript/delta", "params": {"delta": delta}})
    card = reduce(card, {"method": "thread/realtime/closed", "params": {}})
    preview = card.to_dict()["realtime"]["transcriptPreview"]
    assert TOKEN not in preview and len(preview) <= 200 and preview.endswith("x" * 100), preview


def test_the_realtime_transcript_holds_back_a_half_arrived_word():
    card = new_card()
    for delta in ("the key is sk-proj-ab", "cdefghijklmnop1234 ok"):
        card = reduce(card, {"method": "thread/realtime/transcript/delta", "params": {"delta": delta}})
        preview = card.to_dict()["realtime"]["transcriptPreview"]
        assert "proj-ab" not in preview and "cdefgh" not in preview, preview


def test_the_reasoning_summary_holds_back_a_half_arrived_word():
    card = reduce(new_card(), {"method": "turn/started", "params": {"turn": {"id": "t", "status": "inProgress"}}})
    shown = []
    for delta in ("I found sk-proj-ab", "cdefghijklmnop1234 in the env"):
        card = reduce(card, {"method": "item/reasoning/summaryTextDelta",
                             "params": {"delta": delta, "summaryIndex": 0, "itemId": "r", "threadId": "x",
                                        "turnId": "t"}})
        shown.append(card.to_dict()["reasoningSummary"]["text"])
    assert not any("proj-ab" in text or "cdefgh" in text for text in shown), shown


def test_third_party_loggers_pass_through_the_redaction_filter(tmp_path: Path, capfd):
    setup_logging("info", tmp_path / "logs", json_lines=True)
    try:
        logging.getLogger("aiohttp.server").error("Error handling request Authorization: Bearer %s", TOKEN)
        logging.getLogger("some.library").warning("leaked sk-proj-abcdefghijklmnop1234")
    finally:
        stderr = capfd.readouterr().err
        remove_handlers()
    log = (tmp_path / "logs" / "boss-agent.log").read_text()
    assert TOKEN not in stderr + log and "abcdefghijklmnop1234" not in stderr + log
    lines = [json.loads(line) for line in log.splitlines()]
    assert {line["logger"] for line in lines} >= {"aiohttp.server", "some.library"}, lines


GHP = "ghp_" + "Zq7Xw2Lm9Rt4Vb8Nc1Kd" * 2


@pytest.mark.parametrize("glued", [
    f"token_{GHP}", f"GITHUB_TOKEN_{GHP}", f"my_sk-proj-{TOKEN}", "AWS_AKIAABCDEFGHIJKLMNOP",
    f"slack_xoxb-{TOKEN}", f"jwt_eyJ{TOKEN}.eyJ{TOKEN}.sig", f"x_github_pat_{TOKEN}", f"npm_token_npm_{TOKEN}",
    f"hf_key_hf_{TOKEN}", f"key_AIza{TOKEN}", f"ci_glpat-{TOKEN}", f"x_sk_live_{TOKEN}",
    # a letter of another script is a word character too, as an underscore is
    f"密钥{GHP}",
])
def test_a_token_glued_to_a_word_by_an_underscore_is_masked(glued):
    out = sanitize_text(f"set {glued} now", limit=None)
    assert TOKEN not in out and "Zq7Xw2Lm9Rt4" not in out and "ABCDEFGHIJKLMNOP" not in out, out
    assert MASK in out


@pytest.mark.parametrize("word", ["risk-assessment-2024-final", "task-12345678-abc", "desk_live_deadbeef99",
                                  "highp_precision_float_value"])
def test_a_prefix_inside_a_word_is_not_a_token(word):
    assert sanitize_text(f"see {word} here", limit=None) == f"see {word} here"
