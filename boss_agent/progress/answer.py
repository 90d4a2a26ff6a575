"""The agent's answer on its way to the card: kept bounded, previewed from its tail.

A streamed answer can be 100,000 deltas long. ``grow_answer`` keeps the last 24-32 KiB
of it (cut at a boundary, so no secret is kept without its head), and the preview
sanitizes only a short window at the end (``tail_window``), so a delta costs the same
at the end of a long turn as at its start. ``clean_answer`` strips Codex's envelopes
and environment notices and masks secrets before it cuts.
"""

from __future__ import annotations

from boss_agent.redact import ENVELOPE_TAGS, redact_answer

PREVIEW_CONTEXT = 300  # chars sanitized before the preview tail: room for a secret's key
# The streamed answer the card keeps: past this the head is dropped, so a 100,000-delta
# turn costs the same per delta at its end as at its start. Above resultText's 20,000
# chars, so a turn cut off before its final message still reports a full-length answer.
ANSWER_KEEP_CHARS = 32_768
ANSWER_KEPT_AFTER_CUT = 24_576  # still above resultText's 20,000 chars; cuts come every ~8 KiB
LINE_REACH = 2_048  # how far back the preview looks for a line start before a word start will do


def tail_window(text: str, limit: int) -> str:
    """The end of a long answer, with enough before it that every secret shown is whole.

    A secret pattern needs at most a short key before its value ("Authorization:
    Bearer "), so ``PREVIEW_CONTEXT`` chars before the shown tail are enough. The cut
    then moves back to a line start (the environment-notice filter works on whole
    lines), and back to the opening tag of an envelope still open there (so no
    envelope's body survives without its head), and back to the start of a private-key
    block still open there (a key block is longer than the context).
    """
    start = len(text) - limit - PREVIEW_CONTEXT
    if start <= 0:
        return text
    low = text.lower()
    key = low.rfind("-----begin", 0, start)
    if key >= 0 and not 0 <= low.find("-----end", key) < start:
        start = key  # a private-key block still open at the cut: sanitize it whole
    for tag in ENVELOPE_TAGS:
        opened = low.rfind(f"<{tag}>", 0, start)
        if opened >= 0 and not 0 <= low.find(f"</{tag}>", opened) < start:
            start = min(start, opened)
    return text[_boundary_before(text, start):]


def _boundary_before(text: str, start: int) -> int:
    """A line start at or before ``start``; on one very long line, a word start.

    A word start is as safe as a line start for the secret patterns (a token has no
    blanks), and it keeps the window short when an answer has no newlines at all.
    """
    line = text.rfind("\n", max(0, start - LINE_REACH), start)
    if line >= 0:
        return line + 1
    word = max(text.rfind(" ", 0, start), text.rfind("\t", 0, start))
    return word + 1 if word >= 0 else 0


def grow_answer(answer: str, delta: str) -> str:
    """The streamed answer plus one delta, its head dropped past ``ANSWER_KEEP_CHARS``.

    The cut moves on to a boundary (as the preview's window does), so no secret is
    kept without its head.
    """
    text = answer + delta
    if len(text) <= ANSWER_KEEP_CHARS:
        return text
    cut = len(text) - ANSWER_KEPT_AFTER_CUT
    return text[_boundary_after(text, cut):]


def _boundary_after(text: str, cut: int) -> int:
    line = text.find("\n", cut, cut + LINE_REACH)
    if line >= 0:
        return line + 1
    word = text.find(" ", cut)
    return word + 1 if word >= 0 else len(text)


def clean_answer(text: str, *, workdir: str | None, limit: int | None) -> str:
    """The agent's answer without Codex envelopes, sanitized (masking before the cut).

    The preview works on the tail window only: filtering the whole answer on every
    upload made serializing a long answer cost O(answer) regex work each time.
    """
    if limit is not None:
        text = tail_window(text, limit)
    text = redact_answer(text, workdir)  # what the answer's stream lets out, joined
    if limit is not None and len(text) > limit:
        text = "…" + text[-(limit - 1):]
    return text
