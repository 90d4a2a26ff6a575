"""The one sanitizer: every string that leaves the device passes through here.

It masks secrets (API keys, bearer tokens, JWTs, private keys, Authorization values,
passwords and query strings in URLs, the values of secret-named keys in headers, JSON
and escaped JSON, cookies), rewrites absolute paths to workdir-relative or
``~``-relative form, drops Codex envelope fragments, and bounds the length. Before any
pattern runs, the text is normalised: control, format (Unicode ``Cf``) and other
invisible characters are dropped and compatibility forms folded (NFKC), so a secret
broken up by a soft hyphen or written in full-width letters is still recognised. The
card, log lines, error messages and gateway events all call ``sanitize_text``; nothing
else masks.

It is a safety net on top of the card's allow-list, not a replacement for it:
command text, output, diffs and prompts never reach this function in the first place.
"""

from __future__ import annotations

import os
import re
import unicodedata
from pathlib import Path

MASK = "[redacted]"

# A token starts where no letter or digit precedes it: after a space or punctuation as
# ``\b`` would have it, but also after an underscore or a letter of another script
# (``GITHUB_TOKEN_ghp_…``, ``密钥ghp_…``), which ``\b`` counts as part of the word.
_START = r"(?<![A-Za-z0-9])"
# Each pattern with the lower-case literals one of which any match must contain, as one
# compiled search: it skips the pattern for the common text that has none (the card is
# re-serialized while an answer streams; see bench/bench_card.py).
_SECRET_RULES: tuple[tuple[re.Pattern[str], re.Pattern[str]], ...] = tuple(
    (re.compile("|".join(map(re.escape, triggers))), re.compile(p, re.IGNORECASE | re.DOTALL))
    for triggers, p in (
        (("private key",),
         r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)"),
        (("eyj",), rf"{_START}eyJ[A-Za-z0-9_-]{{4,}}\.[A-Za-z0-9_-]{{4,}}(?:\.[A-Za-z0-9_-]*)?"),  # JWT / JWS
        (("sk-", "rk-", "pk-"),  # OpenAI & co.
         rf"{_START}(?:sk|rk|pk)-(?:proj-|live-|test-|ant-)?[A-Za-z0-9_-]{{8,}}"),
        (("_live_", "_test_"), rf"{_START}(?:sk|rk|pk|whsec)_(?:live|test)_[A-Za-z0-9]{{8,}}"),  # Stripe
        (("ya29.",), rf"{_START}ya29\.[A-Za-z0-9_-]{{16,}}"),  # Google OAuth access token
        (("xapp-",), rf"{_START}xapp-[A-Za-z0-9-]{{8,}}"),
        (("sg.",), rf"{_START}SG\.[A-Za-z0-9_-]{{16,}}\.[A-Za-z0-9_-]{{16,}}"),  # SendGrid
        (("gh",), rf"{_START}gh[pousr]_[A-Za-z0-9]{{16,}}"),
        (("github_pat_",), rf"{_START}github_pat_[A-Za-z0-9_]{{16,}}"),
        (("xox",), rf"{_START}xox[abprs]-[A-Za-z0-9-]{{8,}}"),
        (("akia", "asia"), rf"{_START}(?:AKIA|ASIA)[A-Z0-9]{{16}}\b"),
        (("aiza",), rf"{_START}AIza[A-Za-z0-9_-]{{20,}}"),
        (("glpat-",), rf"{_START}glpat-[A-Za-z0-9_-]{{16,}}"),
        (("npm_",), rf"{_START}npm_[A-Za-z0-9]{{20,}}"),
        (("hf_",), rf"{_START}hf_[A-Za-z0-9]{{20,}}"),
    )
)
_SECRET_PATTERNS: tuple[re.Pattern[str], ...] = tuple(p for _, p in _SECRET_RULES)
_KEYED_TRIGGERS = re.compile("authorization|bearer|token|secret|passw|key|session|cookie")  # lower case
# A key's value in every notation a log or an answer quotes it in: ``key: v``, ``key=v``,
# ``"key": "v"`` (JSON), ``\"key\": \"v\"`` (JSON inside a JSON string), ``'key': 'v'``.
# A quoted value is masked up to its closing quote (spaces and escaped quotes
# included); an unquoted one up to the next space or separator.
_QUOTE = r"\\*[\"']"
_SCHEME = r"(?:(?:bearer|basic|token|digest)\s+)?"
_VALUE = (rf"(?:(?P<q>{_QUOTE}){_SCHEME}(?P<quoted>(?:\\.|[^\\\n])+?)(?=(?P=q))"
          rf"|(?:{_QUOTE})?{_SCHEME}(?P<bare>[^\s\"'&,;\\<>]{{3,}}))")
_KEYED_SECRET = re.compile(
    r"(?:\b(?:proxy-)?authorization|\b[a-z0-9_-]*(?:token|secret|passwd|password|api[_-]?key|apikey"
    r"|access[_-]?key|private[_-]?key|session[_-]?id))"
    rf"(?:{_QUOTE})?\s*[:=]\s*{_VALUE}"
    r"|\bbearer\s+(?P<bearer>[^\s\"'&,;\\<>]{3,})",
    re.IGNORECASE,
)
# Cookie headers: the whole value (every name=value pair) up to the end of the header.
_COOKIE = re.compile(
    rf"\b(?:set-)?cookie(?:{_QUOTE})?\s*[:=]\s*"
    rf"(?:(?P<q>{_QUOTE})(?P<quoted>(?:\\.|[^\\\n])+?)(?=(?P=q))|(?:{_QUOTE})?(?P<bare>[^\r\n\"'\\]+))",
    re.IGNORECASE,
)
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s\"'<>]+", re.IGNORECASE)
_URL_USERINFO = re.compile(r"^([a-z][a-z0-9+.-]*://)[^/@\s]*@", re.IGNORECASE)
ENVELOPE_TAGS = (
    "environment_context", "user_instructions", "turn_aborted", "developer_instructions",
    "permissions instructions", "collaboration_mode", "apps_instructions", "skills_instructions",
)
_ENVELOPES = re.compile(
    r"<(" + "|".join(re.escape(tag) for tag in ENVELOPE_TAGS) + r")>.*?(?:</\1>|\Z)",
    re.IGNORECASE | re.DOTALL,
)
_ANSI = re.compile(r"\x1b(?:\[[0-9;?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
_WINDOWS_HOME = re.compile(r"\b[A-Za-z]:[\\/](?:Users|Documents and Settings)[\\/][^\\/\s\"'<>]+", re.IGNORECASE)
_FILE_URL = re.compile(r"\bfile://(?=/)", re.IGNORECASE)
# Lines of an answer that describe the device's execution set-up, not the user's question.
_ENVIRONMENT_NOTICE = re.compile(
    r"^[^\n]*\b(?:approval[_ ]policy|sandbox[_ ](?:mode|policy|permissions)|danger-full-access"
    r"|workspace-write sandbox|read-only sandbox|sandbox is (?:read-only|workspace-write))\b[^\n]*(?:\n|$)",
    re.IGNORECASE | re.MULTILINE,
)
# Control characters, every format character (Unicode category Cf: soft hyphen, zero
# width, bidi controls, tags...), variation selectors and the other invisible fillers:
# inserted into a secret they hide it from every pattern, and a screen shows none of them.
_INVISIBLE = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f"
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e"
    "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f"
    "\u034f\u115f\u1160\u180b-\u180d\u180f\u3164\ufe00-\ufe0f\uffa0\U000e0100-\U000e01ef]"
)
_ABS_PATH = re.compile(r"(?<![\w.~:/])/(?:[^\s\"'`<>(){}\[\],;:]+)")


def _mask_url(match: re.Match[str]) -> str:
    url = _URL_USERINFO.sub(lambda m: m.group(1) + MASK + "@", match.group(0))
    for sep in ("?", "#"):
        if sep in url:
            url = url.split(sep, 1)[0] + sep + MASK
    return url


def _mask_value(match: re.Match[str]) -> str:
    """The match with only its value (whichever group caught it) replaced by the mask."""
    for group in ("quoted", "bare", "bearer"):
        if group in match.re.groupindex and match.group(group) is not None:
            start, end = match.span(group)
            base = match.start()
            return match.group(0)[:start - base] + MASK + match.group(0)[end - base:]
    return MASK  # pragma: no cover - every alternative has a value group


def normalize(text: str) -> str:
    """Drop invisible characters and fold compatibility forms (NFKC) before matching.

    ``ｓｋ－…`` and ``s\u00adk-…`` look like ``sk-…`` on a screen; they must look like it
    to the patterns too.
    """
    text = _INVISIBLE.sub("", text)
    return text if text.isascii() else unicodedata.normalize("NFKC", text)


def mask_secrets(text: str) -> str:
    """Mask every secret-looking run in ``text`` (normalised first)."""
    text = normalize(text)
    lower = text.lower()
    for triggers, pattern in _SECRET_RULES:
        if triggers.search(lower):
            text = pattern.sub(MASK, text)
    if "://" in text:
        # file:///home/u/x is a path, not a web address: let the path rules rewrite it.
        text = _URL.sub(_mask_url, _FILE_URL.sub("", text))
    if "cookie" in lower:
        text = _COOKIE.sub(_mask_value, text)
    if _KEYED_TRIGGERS.search(lower):
        text = _KEYED_SECRET.sub(_mask_value, text)
    return text


def relativize_paths(text: str, workdir: str | Path | None = None, home: str | None = None) -> str:
    """Rewrite absolute paths: under the workdir to relative, under home to ``~``.

    Other absolute paths keep only their file name, so no user directory layout
    leaves the device.
    """
    if "/" not in text and ":" not in text:
        return text
    home = home if home is not None else os.path.expanduser("~")
    roots: list[tuple[str, str]] = []
    if workdir:
        roots.append((str(workdir).rstrip("/") + "/", ""))
        roots.append((str(workdir).rstrip("/"), "."))
    if home and home != "/":
        roots.append((home.rstrip("/") + "/", "~/"))
        roots.append((home.rstrip("/"), "~"))

    def rewrite(match: re.Match[str]) -> str:
        path = match.group(0)
        for root, replacement in roots:
            if path == root or (root.endswith("/") and path.startswith(root)):
                return replacement + path[len(root):] if root.endswith("/") else replacement
        return ".../" + path.rstrip("/").rsplit("/", 1)[-1] if path.count("/") > 1 else path

    if ":" in text:
        text = _WINDOWS_HOME.sub("~", text)
    return _ABS_PATH.sub(rewrite, text) if "/" in text else text


def strip_envelopes(text: str) -> str:
    """Drop Codex envelope fragments (environment context, injected instructions)."""
    return _ENVELOPES.sub("", text) if "<" in text else text


def strip_environment_notices(text: str) -> str:
    """For the agent's answer only: drop lines about the sandbox / approval set-up.

    Not part of ``sanitize_text``: a warning such as "sandbox capped to workspace-write"
    is meant for the user and must survive.
    """
    text = strip_envelopes(text)
    low = text.lower()
    # Every alternative of the pattern contains one of these words; most answers have
    # none, and the line-wise regex is the dearest step of serializing a long answer.
    if "approval" not in low and "sandbox" not in low and "danger-full-access" not in low:
        return text
    return _ENVIRONMENT_NOTICE.sub("", text)


def settled_prefix(text: str) -> str:
    """The part of still-streaming text that masking can no longer change.

    A secret arriving in pieces ("sk-proj-ab", then "cdef…"; ``"password": "correct``,
    then `` horse``) is recognised only once whole, so the tail is held back by the
    rules of ``StreamRedactor`` (a word not ended, a key whose value has not ended…).
    For a field each upload shows anew (the reasoning summary, the realtime
    transcript); the answer streams through ``StreamRedactor`` itself. The text comes
    back prepared (escape sequences out, normalized), which the sanitizer keeps as is.
    """
    text = _prepare(text)
    return text[:_settled_cut(text)]


def sanitize_text(
    value: object,
    *,
    workdir: str | Path | None = None,
    limit: int | None = 500,
    tail: bool = False,
) -> str:
    """The one function every outgoing string goes through.

    ``limit`` bounds the length (``tail`` keeps the end instead of the start, for
    streaming answers). Masking happens before truncation so a cut can never
    expose half a secret.
    """
    text = value if isinstance(value, str) else str(value)
    if "\x1b" in text:
        text = _ANSI.sub("", text)  # before normalize, which drops the ESC and leaves the rest
    text = normalize(text)
    if "<" in text:
        text = strip_envelopes(text)
    text = relativize_paths(mask_secrets(text), workdir)
    if limit is not None and len(text) > limit:
        text = ("…" + text[-(limit - 1):]) if tail else (text[: limit - 1] + "…")
    return text


# ------------------------------------------------------------------ shown for a decision

REVEAL_LIMIT_BYTES = 16 * 1024  # device API §6: what a person approves is never cut before this
_KEPT_CONTROLS = frozenset("\n\t")  # a command's lines and indentation are part of what it does


def _escape(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _hidden(char: str) -> bool:
    """A character a screen would not show as itself: control, format, bidi, zero-width,
    separators other than the space, unassigned, and look-alike compatibility forms."""
    if char in _KEPT_CONTROLS:
        return False
    if char.isascii():
        return not char.isprintable()
    category = unicodedata.category(char)
    return (category[0] in "CZM" and char != " ") or bool(_INVISIBLE.match(char)) \
        or unicodedata.normalize("NFKC", char) != char


def visible(text: str) -> str:
    """``text`` with every hidden character written as its escape (``\\x1b``, ``\\u202e``)."""
    shown = "".join(_escape(c) if _hidden(c) else c for c in text)
    if not unicodedata.is_normalized("NFKC", shown):  # characters that compose only in sequence
        shown = "".join(c if c.isascii() else _escape(c) for c in shown)
    return shown


def home_relative(text: str, home: str | None = None) -> str:
    """Absolute paths under the home directory as ``~/…``; every other path stays as it is."""
    home = (home if home is not None else os.path.expanduser("~")).rstrip("/")
    if not home or home not in text:
        return text

    def rewrite(match: re.Match[str]) -> str:
        path = match.group(0)
        if path == home:
            return "~"
        return "~/" + path[len(home) + 1:] if path.startswith(home + "/") else path
    return _ABS_PATH.sub(rewrite, text)


def reveal(value: object, *, home: str | None = None,
           limit_bytes: int = REVEAL_LIMIT_BYTES) -> tuple[str, bool]:
    """What a person decides on, shown exactly: ``(text, truncated)``.

    Unlike ``sanitize_text`` nothing is dropped, folded or shortened: hidden characters
    become visible escapes (``\\n`` and tabs stay, they are the command's lines), secrets
    are masked by the same rules, paths under home become ``~``-relative (other absolute
    paths stay whole, they are what the command touches). Only beyond ``limit_bytes``
    (UTF-8) is the text cut, and ``truncated`` says so.
    """
    text = visible(value if isinstance(value, str) else str(value))
    text = home_relative(mask_secrets(text), home)  # the text is NFKC-stable: only masks change it
    raw = text.encode()
    if len(raw) <= limit_bytes:
        return text, False
    return raw[:limit_bytes].decode(errors="ignore"), True


# ---------------------------------------------------------------------- streaming

STREAM_HOLD_CHARS = 4096  # the most text held back as a possible secret: a 4096-bit RSA key block (~3.3 KB) fits
STREAM_SHOWN_CHARS = 1024  # the emitted tail a stream keeps: the card previews 500 chars of it
STREAM_LAZY_DELTAS = 256  # deltas left unread before a stream works them out anyway: bounds the chain kept
_KEY_CLOSER_KEEP = 64  # while skipping a key block, the tail kept to find its END line across deltas
_NOTICE_WORDS = ("approval", "sandbox", "danger-full-access")  # every environment notice has one
_KEY_NAME = re.compile(
    r"(?:\b(?:proxy-)?authorization|\b[a-z0-9_-]*(?:token|secret|passwd|password|api[_-]?key|apikey"
    r"|access[_-]?key|private[_-]?key|session[_-]?id))(?![a-z0-9_-])",
    re.IGNORECASE,
)
# What may follow a key while its value can still come: a separator, an opening quote
# (a quoted value runs to its closing quote, never past a line end), a scheme word.
_AFTER_KEY_OPEN = re.compile(
    rf"(?:{_QUOTE})?\s*(?:[:=]\s*(?:{_QUOTE}[^\n]*|(?:{_QUOTE})?(?:bearer|basic|token|digest)\s+)?)?\Z",
    re.IGNORECASE,
)
_BEARER_OPEN = re.compile(r"\bbearer\s+\Z", re.IGNORECASE)
_COOKIE_NAME = re.compile(r"\b(?:set-)?cookie", re.IGNORECASE)
_AFTER_COOKIE_OPEN = re.compile(rf"(?:{_QUOTE})?\s*(?:[:=]\s*[^\r\n]*)?\Z", re.IGNORECASE)
_KEY_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----", re.IGNORECASE)
_KEY_BEGIN_OPEN = re.compile(r"-----BEGIN [A-Z0-9 ]*\Z", re.IGNORECASE)
_KEY_END = re.compile(r"-----END [A-Z0-9 ]*PRIVATE KEY-----", re.IGNORECASE)
_ENVELOPE_OPEN = re.compile(r"<(" + "|".join(re.escape(tag) for tag in ENVELOPE_TAGS) + r")>", re.IGNORECASE)
_ANSI_OPEN = re.compile(r"\x1b(?:\[[0-9;?]*[ -/]*|\][^\x07\x1b]*)?\Z")  # an escape sequence more text may finish


def _prepare(text: str) -> str:
    """Escape sequences out, then ``normalize``: the form every pattern matches."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    return normalize(text)


def _answer_segment(text: str, workdir: str | Path | None) -> str:
    return sanitize_text(strip_environment_notices(text), workdir=workdir, limit=None)


def redact_answer(text: str, workdir: str | Path | None = None) -> str:
    """The agent's answer as it leaves the device: envelopes and environment notices
    dropped, sanitized, stripped. ``StreamRedactor`` streams exactly this text."""
    return _answer_segment(_prepare(text), workdir).strip()


def _open_at(text: str) -> int | None:
    """Where the earliest construct still open at the end of ``text`` starts (``text``
    ends with a blank), or None: a construct whose masking more text may change."""
    low = text.lower()
    starts: list[int] = []
    if "-----begin" in low:
        pos = 0
        while (begin := _KEY_BEGIN.search(text, pos)) is not None:
            end = _KEY_END.search(text, begin.end())
            if end is None:
                starts.append(begin.start())
                break
            pos = end.end()
        partial = _KEY_BEGIN_OPEN.search(text)
        if partial is not None:
            starts.append(partial.start())
    if "<" in text:
        starts += _open_envelopes(text, low)
    if _KEYED_TRIGGERS.search(low):
        plain = _without_blocks(text)
        found = _open_key(plain, low if plain is text else plain.lower())
        if found is not None:
            # Blocks the masking drops (an envelope, a key block) change what a key sees
            # after them: hold from the first of them when the key lies beyond it.
            starts.append(found if plain is text else min(found, _first_block(text)))
    line = text.rfind("\n") + 1
    if line < len(text) and any(w in low[line:] for w in _NOTICE_WORDS):
        starts.append(line)  # a line the notice filter may drop whole: held to its end
    return min(starts) if starts else None


def _open_envelopes(text: str, low: str) -> list[int]:
    starts = []
    pos = 0
    while (tag := _ENVELOPE_OPEN.search(text, pos)) is not None:
        close = low.find(f"</{tag.group(1).lower()}>", tag.end())
        if close < 0:
            starts.append(tag.start())
            break
        pos = close
    lt = low.rfind("<")
    rest = low[lt + 1:]
    if any(f"{tag}>".startswith(rest) for tag in ENVELOPE_TAGS):
        starts.append(lt)  # a tag name with a blank in it, cut at the blank
    return starts


def _without_blocks(text: str) -> str:
    """``text`` as the key patterns see it: envelopes dropped, key blocks masked."""
    out = strip_envelopes(text)
    if "-----begin" in out.lower():
        out = _SECRET_PATTERNS[0].sub(MASK, out)
    return text if out == text else out


def _first_block(text: str) -> int:
    found = [m.start() for m in (_ENVELOPE_OPEN.search(text), _KEY_BEGIN.search(text)) if m is not None]
    return min(found, default=0)


def _open_key(text: str, low: str) -> int | None:
    """The first key (or ``Bearer``) whose value more text may still extend."""
    for key in _KEY_NAME.finditer(text):
        match = _KEYED_SECRET.match(text, key.start())
        if match is not None and match.group("quoted") is not None:
            continue  # a quoted value closed by its quote: final
        if _AFTER_KEY_OPEN.match(text, key.end()):
            return key.start()
    bearer = _BEARER_OPEN.search(text) if "bearer" in low else None
    found = bearer.start() if bearer is not None else None
    if "cookie" in low:
        for key in _COOKIE_NAME.finditer(text):
            match = _COOKIE.match(text, key.start())
            if match is not None and match.group("quoted") is not None:
                continue
            if _AFTER_COOKIE_OPEN.match(text, key.end()):
                return key.start() if found is None else min(found, key.start())
    return found


def _settled_cut(text: str) -> int:
    """The end of the longest prefix of prepared ``text`` that ends with a blank and in
    which nothing is still open: masking it alone is masking it within any longer text."""
    cut = _last_blank(text, len(text))
    while cut:
        start = _open_at(text[:cut])
        if start is None:
            break
        cut = _last_blank(text, start)
    return cut


def _last_blank(text: str, before: int) -> int:
    """The index just after the last blank before ``before`` (0 when there is none)."""
    return max(text.rfind(" ", 0, before), text.rfind("\n", 0, before), text.rfind("\t", 0, before)) + 1


class StreamRedactor:
    """The sanitizer for text that arrives in pieces (the agent's answer as it streams).

    ``feed(delta)`` returns the next state; its ``out`` is the text that became final
    since the last state anyone read. Only text masking can no longer change goes out:
    the tail is held back while it may be inside a secret (a word not yet ended, which
    covers token prefixes, JWTs, base64 and hex runs and URLs; a secret-like key whose
    value has not ended, with a quoted value held to its closing quote or the line end;
    ``Bearer``; a cookie header to its line end; a private-key block or a Codex
    envelope to its end; a line an environment notice may turn out to be). Everything
    ``out`` ever holds, joined with ``finish()``'s, is ``redact_answer`` of the whole
    text: a reader appends and never has to take anything back.

    The held tail is bounded by ``STREAM_HOLD_CHARS``: past it the held text goes out
    as ``[redacted]`` (and the rest of that line, or of that key block or envelope, is
    dropped), so a stream that never closes what it opened still flows and still leaks
    nothing. Only then does the stream differ from the final answer.

    States never change as seen from outside: every call returns a new one (a card
    keeps its stream, an old card stays valid), and ``origin`` is shared by all states
    of one stream. A state is worked out when first read: deltas nobody looks at
    (the card is serialized a few times a second) are sanitized together, in one go,
    at most ``STREAM_LAZY_DELTAS`` of them.
    """

    __slots__ = ("workdir", "origin", "fed", "done", "_parent", "_delta", "_depth", "_held", "_raw", "_out",
                 "_shown", "_sent", "_started", "_space", "_skip")
    workdir: str | Path | None
    origin: object
    fed: int  # characters fed in all
    done: bool
    _parent: StreamRedactor | None  # the state before, until this one is worked out
    _delta: str
    _depth: int  # deltas since the last worked-out state
    _held: str  # prepared text not yet emitted
    _raw: str  # an escape sequence not yet complete, as it arrived
    _out: str  # what working this state out emitted
    _shown: str  # the last STREAM_SHOWN_CHARS (and at least ``_out``) of everything emitted
    _sent: int  # characters emitted in all
    _started: bool  # leading blanks dropped until the first visible character
    _space: str  # blanks at the end of what went out, sent once text follows them
    _skip: re.Pattern[str] | None  # the held bound was hit: drop text up to this closer

    def __init__(self, workdir: str | Path | None = None) -> None:
        self.workdir = workdir
        self.origin = object()
        self.fed = 0
        self.done = False
        self._parent = None
        self._delta = ""
        self._depth = 0
        self._held = self._raw = self._out = self._shown = self._space = ""
        self._sent = 0
        self._started = False
        self._skip = None

    # --- reading a state ------------------------------------------------------------
    @property
    def out(self) -> str:
        self._work_out()
        return self._out

    @property
    def shown(self) -> str:
        self._work_out()
        return self._shown

    @property
    def sent(self) -> int:
        self._work_out()
        return self._sent

    def preview(self, limit: int) -> str | None:
        """The last ``limit`` characters of what went out ("…" first when cut)."""
        self._work_out()
        if not self._shown:
            return None
        if self._sent <= limit:
            return self._shown
        return "…" + self._shown[-(limit - 1):]

    # --- the next state -------------------------------------------------------------
    def feed(self, delta: str) -> StreamRedactor:
        """The state after ``delta``."""
        if self.done:
            return StreamRedactor(self.workdir).feed(delta)
        new = _new_stream(StreamRedactor)
        new.workdir = self.workdir
        new.origin = self.origin
        new.fed = self.fed + len(delta)
        new.done = False
        new._parent = self
        new._delta = delta
        new._depth = self._depth + 1
        if new._depth >= STREAM_LAZY_DELTAS:
            new._work_out()
        return new

    def finish(self) -> StreamRedactor:
        """The last state: its ``out`` is the rest, now that no more text comes."""
        self._work_out()
        new = self._copy()
        pending = self._held + _prepare(self._raw) if self._raw else self._held
        new._raw = ""
        new.done = True
        new._advance(normalize(pending), final=True)
        return new

    # --- working a state out (only ever on a state nobody has read yet) ------------
    def _copy(self) -> StreamRedactor:
        new = _new_stream(StreamRedactor)
        new.workdir, new.origin, new.fed, new.done = self.workdir, self.origin, self.fed, self.done
        new._parent, new._delta, new._depth = None, "", 0
        new._held, new._raw, new._out, new._shown = self._held, self._raw, "", self._shown
        new._sent, new._started, new._space, new._skip = self._sent, self._started, self._space, self._skip
        return new

    def _work_out(self) -> None:
        if self._parent is None:
            return
        deltas, node = [], self
        while node._parent is not None:
            deltas.append(node._delta)
            node = node._parent
        deltas.reverse()
        self._held, self._raw, self._out, self._shown = node._held, node._raw, "", node._shown
        self._sent, self._started, self._space, self._skip = node._sent, node._started, node._space, node._skip
        self._parent, self._delta, self._depth = None, "", 0
        self._consume("".join(deltas))

    def _consume(self, text: str) -> None:
        raw = self._raw + text
        self._raw = ""
        if "\x1b" in raw:
            esc = raw.rfind("\x1b")
            if _ANSI_OPEN.match(raw, esc) and len(raw) - esc <= STREAM_HOLD_CHARS:
                raw, self._raw = raw[:esc], raw[esc:]
        new = _prepare(raw)
        pending = normalize(self._held + new) if self._held and not new.isascii() else self._held + new
        if self._skip is None and len(pending) <= STREAM_HOLD_CHARS and not any(b in new for b in _CUT_CHARS):
            self._held = pending  # no blank came: no new place to cut
            return
        self._advance(pending, final=False)

    def _advance(self, pending: str, *, final: bool) -> None:
        pending = self._skipped(pending)
        if self._skip is not None:
            self._held = "" if final else pending
            self._emit("", final)
            return
        if final:
            self._held = ""
            self._emit(_answer_segment(pending, self.workdir), final)
            return
        cut = _settled_cut(pending)
        text = _answer_segment(pending[:cut], self.workdir) if cut else ""
        held = pending[cut:]
        if len(held) > STREAM_HOLD_CHARS:
            self._skip = _closer(held)
            self._held = self._skipped(held)
            self._emit(text + MASK, final)
            return
        self._held = held
        self._emit(text, final)

    def _skipped(self, pending: str) -> str:
        """While skipping, drop text up to the closer (a key block's END line and an
        envelope's closing tag with it); keep what follows."""
        if self._skip is None:
            return pending
        found = self._skip.search(pending)
        if found is None:
            return pending[-_KEY_CLOSER_KEEP:] if self._skip is not _LINE_END else ""
        closer, self._skip = self._skip, None
        return pending[found.start() if closer is _LINE_END else found.end():]  # the line end stays

    def _emit(self, text: str, final: bool) -> None:
        if not self._started:
            text = text.lstrip()
            if not text:
                return
            self._started = True
        text = self._space + text
        body = text.rstrip()
        self._space = "" if final else text[len(body):]
        if body:
            self._out += body
            self._sent += len(body)
            shown = self._shown + body
            keep = max(STREAM_SHOWN_CHARS, len(self._out))
            self._shown = shown if len(shown) <= keep else shown[-keep:]


_new_stream = object.__new__
_CUT_CHARS = (" ", "\t", "\n")
_LINE_END = re.compile(r"\n")


def _closer(held: str) -> re.Pattern[str]:
    """What ends the run the held bound cut into: a key block's END line, an
    envelope's closing tag, else the line end."""
    low = held.lower()
    begin = _KEY_BEGIN.search(held)
    if begin is not None and _KEY_END.search(held, begin.end()) is None:
        return _KEY_END
    tag = _ENVELOPE_OPEN.search(held)
    if tag is not None and f"</{tag.group(1).lower()}>" not in low:
        return re.compile(re.escape(f"</{tag.group(1)}>"), re.IGNORECASE)
    return _LINE_END
