"""The answer preview is cut from the tail, but never cuts an envelope or a notice in two."""

from __future__ import annotations

from boss_agent.progress.card import ANSWER_PREVIEW_CHARS, clean_answer

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
