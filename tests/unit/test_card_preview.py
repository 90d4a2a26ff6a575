"""The answer preview is cut from the tail, but never cuts an envelope or a notice in two."""

from __future__ import annotations

from boss_agent.progress.answer import clean_answer
from boss_agent.progress.card import ANSWER_PREVIEW_CHARS

FILLER = "word " * 400  # longer than the preview window


def preview(text: str) -> str:
    return clean_answer(text, workdir=None, limit=ANSWER_PREVIEW_CHARS)


def test_an_envelope_opened_before_the_window_is_dropped_whole() -> None:
    body = ("x " * 200 + "\n") * 5  # the window starts at a line inside the envelope
    text = FILLER + "<environment_context>SECRET-BODY\n" + body + "</environment_context>\nthe real answer"
    shown = preview(text)
    assert "SECRET-BODY" not in shown and "x x" not in shown
    assert shown.endswith("the real answer")


def test_a_sandbox_notice_line_straddling_the_window_start_is_dropped_whole() -> None:
    # The line starts far before the window and ends inside the shown tail.
    notice = "Note: the approval policy is never " + "y" * 900
    text = FILLER + "\n" + notice + "\nDone."
    shown = preview(text)
    assert "approval policy" not in shown and "yyy" not in shown
    assert shown.endswith("Done.")


def test_a_short_answer_is_kept_whole() -> None:
    assert preview("All tests pass.") == "All tests pass."


def test_a_secret_streamed_in_pieces_is_never_shown_half_arrived() -> None:
    from boss_agent.progress.card import new_card
    from boss_agent.progress.reducer import reduce

    secret = "ghp_" + "Kx9" * 10
    card, shown = new_card(), []
    for piece in ["The token ", secret[:6], secret[6:18], secret[18:], " is set. ", "Done"]:
        card = reduce(card, {"method": "item/agentMessage/delta", "params": {"delta": piece}})
        shown.append(card.to_dict()["answerPreview"] or "")
    assert not any("ghp_K" in s or "Kx9" in s for s in shown)
    assert shown[-1] == "The token [redacted] is set."  # "Done" waits for what follows it
    card = reduce(card, {"method": "boss/finished", "params": {"status": "completed"}})
    assert card.to_dict()["answerPreview"] == "The token [redacted] is set. Done"


def test_an_answer_on_one_long_line_is_sanitized_from_a_short_window() -> None:
    from boss_agent.progress.answer import PREVIEW_CONTEXT, tail_window

    text = "w " * 100_000  # 200,000 chars and not one newline: a model streaming a wall of words
    window = tail_window(text, ANSWER_PREVIEW_CHARS)
    assert len(window) <= ANSWER_PREVIEW_CHARS + PREVIEW_CONTEXT
    assert text.endswith(window) and window.startswith("w")


def test_a_private_key_block_open_before_the_window_is_sanitized_whole() -> None:
    key = "-----BEGIN OPENSSH PRIVATE KEY-----\n" + "b3BlbnNzaC1rZXk " * 60 + "\n-----END OPENSSH PRIVATE KEY-----"
    shown = preview("Here it is:\n" + key + "\nkeep it safe")
    assert "b3BlbnNzaC1rZXk" not in shown and shown.endswith("keep it safe")
    # Merely naming a private key no longer makes every upload sanitize the whole answer.
    from boss_agent.progress.answer import PREVIEW_CONTEXT, tail_window
    talk = "about the private key rotation " * 2000
    assert len(tail_window(talk, ANSWER_PREVIEW_CHARS)) <= ANSWER_PREVIEW_CHARS + PREVIEW_CONTEXT


def test_the_streamed_answer_the_card_keeps_is_bounded_and_its_tail_exact() -> None:
    from boss_agent.progress.answer import ANSWER_KEEP_CHARS
    from boss_agent.progress.card import new_card
    from boss_agent.progress.reducer import reduce

    card = new_card()
    words = [f" w{i}" for i in range(30_000)]
    for word in words:
        card = reduce(card, {"method": "item/agentMessage/delta", "params": {"delta": word}})
        assert len(card.answer) <= ANSWER_KEEP_CHARS
    full = "".join(words)
    assert full.endswith(card.answer) and len(card.answer) > 20_000  # resultText's length still fits
    card = reduce(card, {"method": "boss/finished", "params": {"status": "completed"}})
    assert card.to_dict()["answerPreview"].endswith(full[-100:])


def test_a_secret_straddling_the_dropped_head_is_dropped_whole() -> None:
    from boss_agent.progress.answer import ANSWER_KEEP_CHARS, ANSWER_KEPT_AFTER_CUT, grow_answer

    secret = "sk-" + "A1b2C3d4" * 8
    head, rest = "x " * 5000, " and the rest "
    assert len(head) > ANSWER_KEEP_CHARS - ANSWER_KEPT_AFTER_CUT
    # Sized so the cut lands 10 chars into the secret: neither its head nor its tail may stay.
    delta = "y" * (ANSWER_KEPT_AFTER_CUT + 10 - len(secret) - len(rest))
    text = grow_answer(head + secret + rest, delta)
    assert "A1b2C3d4" not in text and "sk-" not in text
    assert text == "and the rest " + delta
