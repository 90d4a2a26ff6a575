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
# Each pattern with the lower-case literals one of which any match must contain: a
# plain substring test skips the regex for the common text that has none (the card is
# re-serialized while an answer streams; see bench/bench_card.py).
_SECRET_RULES: tuple[tuple[tuple[str, ...], re.Pattern[str]], ...] = tuple(
    (triggers, re.compile(p, re.IGNORECASE | re.DOTALL))
    for triggers, p in (
        (("private key",),
         r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)"),
        (("eyj",), rf"{_START}eyJ[A-Za-z0-9_-]{{4,}}\.[A-Za-z0-9_-]{{4,}}(?:\.[A-Za-z0-9_-]*)?"),  # JWT / JWS
        (("sk-", "rk-", "pk-"), rf"{_START}(?:sk|rk|pk)-(?:proj-|live-|test-|ant-)?[A-Za-z0-9_-]{{8,}}"),  # OpenAI & co.
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
_KEYED_TRIGGERS = ("authorization", "bearer", "token", "secret", "passw", "key", "session", "cookie")
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
        if any(t in lower for t in triggers):
            text = pattern.sub(MASK, text)
    if "://" in text:
        # file:///home/u/x is a path, not a web address: let the path rules rewrite it.
        text = _URL.sub(_mask_url, _FILE_URL.sub("", text))
    if "cookie" in lower:
        text = _COOKIE.sub(_mask_value, text)
    if any(t in lower for t in _KEYED_TRIGGERS):
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

    A secret arriving in pieces ("sk-proj-ab", then "cdef…") is recognised only once
    whole, so the trailing run of non-space characters is held back until a space
    follows it; shown earlier, its first pieces would leave unmasked.
    """
    cut = max(text.rfind(" "), text.rfind("\n"), text.rfind("\t"))
    return text[:cut + 1]


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
