"""The one sanitizer: secrets masked, paths relativized, invisible characters gone."""

from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from boss_agent.redact import MASK, sanitize_text, strip_environment_notices

WD = "/srv/work"
HOME = os.path.expanduser("~")

SECRETS = [
    "sk-proj-abcdefghijklmnop1234",
    "sk-ant-api03-abcdefghijklmn",
    "sk_live_abcdefgh12345678",
    "ghp_" + "a" * 36,
    "github_pat_" + "b" * 30,
    "xoxb-1234567890-abcdef",
    "AKIAABCDEFGHIJKLMNOP",
    "AIza" + "c" * 30,
    "glpat-" + "d" * 20,
    "ya29." + "e" * 30,
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl",
    "-----BEGIN OPENSSH PRIVATE KEY-----\nAAAAB3NzaC1\n-----END OPENSSH PRIVATE KEY-----",
]


@pytest.mark.parametrize("secret", SECRETS)
def test_every_known_secret_shape_is_masked(secret: str) -> None:
    out = sanitize_text(f"before {secret} after", limit=None)
    assert secret not in out and MASK in out and out.startswith("before")


@pytest.mark.parametrize(("raw", "expected"), [
    ("Authorization: Bearer abc.def.ghi", "Authorization: Bearer [redacted]"),
    ("curl -H 'x-api-key: k3y-value'", "curl -H 'x-api-key: [redacted]'"),
    ("password = hunter22", "password = [redacted]"),
    ("https://bob:pw@example.com/a?token=1#frag", "https://[redacted]@example.com/a?[redacted]"),
    (f"{WD}/src/app.py", "src/app.py"),
    (f"{HOME}/.ssh/config", "~/.ssh/config"),
    (f"file://{HOME}/notes.txt", "~/notes.txt"),
    ("/opt/other/place/file.txt", ".../file.txt"),
    ("C:\\Users\\bob\\secret.txt", "~\\secret.txt"),
    ("zero\u200bwidth\u202e and \x1b[31mred\x1b[0m\x07", "zerowidth and red"),
])
def test_redaction_rules(raw: str, expected: str) -> None:
    assert sanitize_text(raw, workdir=WD, limit=None) == expected


def test_masking_happens_before_the_cut_so_no_half_secret_survives() -> None:
    secret = "sk-proj-" + "z" * 40
    out = sanitize_text("x" * 480 + " " + secret, limit=500, tail=True)
    assert "zzz" not in out and out.endswith(MASK) and len(out) <= 500


def test_environment_notices_leave_the_answer_but_not_warnings() -> None:
    answer = "Here is the fix.\nNote: approval_policy is never and sandbox_mode is danger-full-access.\nDone."
    assert strip_environment_notices(answer) == "Here is the fix.\nDone."
    assert sanitize_text("sandbox capped to workspace-write") == "sandbox capped to workspace-write"


def test_envelopes_are_dropped() -> None:
    text = "<environment_context><cwd>/x</cwd></environment_context>Answer<turn_aborted>x</turn_aborted>"
    assert sanitize_text(text) == "Answer"


@given(st.text(max_size=60), st.sampled_from(SECRETS[:11]), st.text(max_size=60))
def test_a_secret_anywhere_in_any_text_never_survives(before: str, secret: str, after: str) -> None:
    out = sanitize_text(before + " " + secret + " " + after, limit=None)
    assert secret not in out
