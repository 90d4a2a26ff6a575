"""``approval_view.build``: what a person decides on, from the request alone.

The property tests generate shell commands (operators, quotes, unicode, control and
invisible characters, secrets, home paths) and file lists, and check that the detail
shown is the request with only the documented changes: secrets masked, home paths
``~``-relative, hidden characters as visible escapes. And that no command with an
operator is ever ``low`` risk.
"""

from __future__ import annotations

import shlex

from hypothesis import given, settings
from hypothesis import strategies as st

from boss_agent.progress.approval_view import ApprovalView, available_decisions, build, parse, text_lines
from boss_agent.redact import REVEAL_LIMIT_BYTES

HOME = "/home/tester"
WD = f"{HOME}/proj"
COMMAND = "item/commandExecution/requestApproval"
# Inside the sandbox with extra read access: the one way codex asks for a command that
# does not leave the sandbox, so risk is decided by the command's shape alone.
IN_SANDBOX = {"additionalPermissions": {"fileSystem": {"read": [f"{WD}/data"]}}}
HIDDEN = {"\x1b": "\\x1b", "\u202e": "\\u202e", "\u200b": "\\u200b", "\x07": "\\x07", "\r": "\\x0d",
          "\ufeff": "\\ufeff", "\uff52": "\\uff52", "\u2028": "\\u2028", "\x00": "\\x00"}
# Letters that can never spell a secret trigger (key, token, secret, passw, session,
# cookie, bearer, authorization, aiza, sk-/rk-/pk-, …): no e, s, z, k, and no - _ . : /
SAFE = "abcdfghijlmnopqrtuvwxy0123456789éüЖ日"
SECRETS = ("ghp_" + "A1b2C3d4E5f6G7h8J9k0", "sk-proj-" + "Zz9Yy8Xx7Ww6Vv5Uu4")
OPERATORS = (" && ", " || ", "; ", " | ", "\n", " > ", " < ", " & ", " $(", "`")

# One piece: (what the request says, what the detail must show).
plain = st.text(SAFE + "'\"", min_size=1, max_size=8).map(lambda t: (t, t))
hidden = st.sampled_from(sorted(HIDDEN)).map(lambda c: (c, HIDDEN[c]))
secret = st.sampled_from(SECRETS).map(lambda t: (t, "[redacted]"))
home_path = st.text("abcdfghij0123", min_size=1, max_size=6).map(lambda n: (f"{HOME}/{n}", f"~/{n}"))
other_path = st.text("abcdfghij", min_size=1, max_size=6).map(lambda n: (f"/opt/{n}", f"/opt/{n}"))
word = st.lists(st.one_of(plain, hidden), min_size=1, max_size=3).map(
    lambda parts: ("".join(p[0] for p in parts), "".join(p[1] for p in parts)))
argument = st.one_of(word, word, secret, home_path, other_path)


def _joined(pieces: list[tuple[str, str]], separators: list[str]) -> tuple[str, str]:
    raw, shown = pieces[0]
    for (r, s), sep in zip(pieces[1:], separators, strict=False):
        raw, shown = raw + sep + r, shown + sep + s
    return raw, shown


@st.composite
def commands(draw: st.DrawFn, compound: bool) -> tuple[str, str]:
    program = draw(st.sampled_from(["ls", "rm", "echo", "git", "python3"]))
    pieces = [(program, program)] + draw(st.lists(argument, min_size=1, max_size=6))
    if compound:
        separators = [draw(st.sampled_from([" ", *OPERATORS])) for _ in pieces[1:]]
        separators[draw(st.integers(0, len(separators) - 1))] = draw(st.sampled_from(OPERATORS))
    else:
        separators = [" "] * (len(pieces) - 1)
    return _joined(pieces, separators)


def _view(command: str, **params: object) -> ApprovalView:
    return build(COMMAND, {"command": command, "cwd": WD, **params}, workdir=WD, sandbox="workspace-write",
                 home=HOME)


@settings(max_examples=300, deadline=None)
@given(commands(compound=True))
def test_a_compound_command_is_shown_exactly_and_is_never_low_risk(case: tuple[str, str]) -> None:
    raw, shown = case
    for params in ({}, IN_SANDBOX):
        view = _view(raw, **params)
        assert view.detail is not None and view.detail["command"] == shown
        assert view.risk != "low"
    assert not parse(raw).simple


@settings(max_examples=300, deadline=None)
@given(commands(compound=False))
def test_a_simple_command_is_shown_exactly_and_low_only_inside_the_sandbox(case: tuple[str, str]) -> None:
    raw, shown = case
    view = _view(raw)
    assert view.detail is not None and view.detail["command"] == shown
    assert view.risk == "high" and view.detail["escalated"] is True  # codex runs it unsandboxed
    low = _view(raw, **IN_SANDBOX).risk == "low"
    assert low == parse(raw).simple
    if any(not c.isprintable() for c in raw):  # control or invisible characters: never simple
        assert not low
    if raw.count("'") % 2 or raw.count('"') % 2:  # possibly unbalanced quotes: no clean parse
        assert not low or "'" in raw and '"' in raw


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["inside", "home", "other"]), word,
                          st.sampled_from(["add", "delete", "update"])), min_size=1, max_size=12))
def test_every_file_of_a_patch_is_listed_and_outside_ones_are_high_risk(
        files: list[tuple[str, tuple[str, str], str]]) -> None:
    changes, expected = [], []
    for where, (name, shown), kind in files:
        root, shown_root = {"inside": (WD, ""), "home": (HOME, "~/"), "other": ("/etc", "/etc/")}[where]
        changes.append({"path": f"{root}/{name}", "kind": {"type": kind}, "diff": "SECRET DIFF"})
        expected.append({"path": shown_root + shown, "kind": {"update": "modify"}.get(kind, kind),
                         "outsideWorkspace": where != "inside"})
    view = build("item/fileChange/requestApproval", {"itemId": "p"}, workdir=WD,
                 item={"changes": changes}, home=HOME)
    assert view.detail == {"files": expected}
    assert view.risk == ("high" if any(f["outsideWorkspace"] for f in expected) else "medium")
    assert "SECRET DIFF" not in repr(view)


def test_a_command_over_16_kib_is_cut_marked_truncated_high_risk_and_not_acceptable() -> None:
    view = _view("echo " + "a" * (REVEAL_LIMIT_BYTES + 10), **IN_SANDBOX)
    assert view.detail is not None and view.detail["truncated"] is True
    assert len(view.detail["command"].encode()) == REVEAL_LIMIT_BYTES
    assert view.risk == "high" and not view.acceptable
    assert available_decisions(view, ("accept", "acceptForSession", "decline", "cancel")) == ("decline", "cancel")
    assert "cannot be accepted" in "\n".join(text_lines({"summary": view.summary, "risk": view.risk,
                                                         "detail": view.detail}))


def test_a_command_of_16_kib_is_shown_whole() -> None:
    command = "echo " + "a" * (REVEAL_LIMIT_BYTES - 5)
    view = _view(command)
    assert view.detail is not None and view.detail["command"] == command and "truncated" not in view.detail


def test_the_working_directory_is_relative_inside_and_home_relative_outside() -> None:
    assert _view("ls", cwd=f"{WD}/sub").detail == {
        "command": "ls", "cwd": "sub", "outsideWorkspace": False, "sandbox": "workspace-write",
        "escalated": True, "network": True}
    outside = _view("ls", cwd=f"{HOME}/other").detail or {}
    assert outside["cwd"] == "~/other" and outside["outsideWorkspace"] is True
    assert (_view("ls", cwd="/").detail or {})["cwd"] == "/"


def test_a_compound_summary_names_every_program_not_just_the_first() -> None:
    assert _view("/bin/bash -lc 'ls && rm -rf victim1'").summary == "Run 2 commands: ls, rm (outside the sandbox)"
    assert _view("pytest -q", **IN_SANDBOX).summary == "Run pytest"
    assert _view("pytest -q", **IN_SANDBOX).risk == "low"  # one simple command, sandboxed, offline
    assert _view("echo hi > out", **IN_SANDBOX).summary == "Run echo (with redirection)"
    assert _view("a; b; c; d", **IN_SANDBOX).summary == "Run 4 commands: a, b, c +1 more"
    # A here-document's lines are data: they name no program, the lines after it do.
    assert _view("/bin/bash -lc 'cat <<EOF > f\nhi there\nEOF\nls'").summary == \
        "Run 2 commands: cat, ls (outside the sandbox)"
    assert _view("GITHUB_TOKEN=ghp_abcdefghijklmnop1234 git push").summary == "Run git (outside the sandbox)"


def test_permissions_list_every_path_with_access_and_scope() -> None:
    paths = [f"{WD}/out{n}" for n in range(11)] + [f"{HOME}/.ssh"]
    view = build("item/permissions/requestApproval",
                 {"cwd": WD, "permissions": {"fileSystem": {"write": paths}, "network": {"enabled": True}}},
                 workdir=WD, home=HOME)
    assert view.detail is not None
    assert [p["path"] for p in view.detail["permissions"]] == [f"out{n}" for n in range(11)] + ["~/.ssh"]
    assert {(p["access"], p["scope"]) for p in view.detail["permissions"]} == {("write", "turn")}
    assert view.detail["network"] is True and view.risk == "high"
    assert view.summary == "Grant extra permissions: network, write 12 paths"
    assert len(view.extras["permissions"]) == 13  # network access + every path


def test_a_tool_call_shows_its_arguments_sanitized_keys_and_values() -> None:
    params = {"serverName": "cua", "mode": "form", "message": "Allow?", "requestedSchema": {},
              "_meta": {"codex_approval_kind": "mcp_tool_call", "tool_name": "type_text",
                        "tool_params": {"text": "rm -rf ~\n\x1b[2J", f"{HOME}/k": SECRETS[0]}}}
    view = build("mcpServer/elicitation/request", params, workdir=WD, home=HOME)
    assert view.kind == "tool" and view.risk == "high" and view.summary == "Use the cua tool type_text"
    assert view.detail == {"server": "cua", "tool": "type_text",
                           "arguments": {"text": "rm -rf ~\n\\x1b[2J", "~/k": "[redacted]"}}


def test_an_mcp_form_sanitizes_its_property_names_and_its_server_name() -> None:
    """Issue 26: a property name (a home path, a token) and the server name went out raw."""
    schema = {"type": "object", "properties": {
        f"{HOME}/secret-project": {"type": "string"}, SECRETS[1]: {"type": "string", "title": "t"}}}
    view = build("mcpServer/elicitation/request",
                 {"serverName": f"deploy {SECRETS[0]}", "mode": "form", "message": "m", "requestedSchema": schema},
                 workdir=WD)
    names = list(view.extras["schema"]["properties"])
    assert all(HOME not in n and SECRETS[1] not in n for n in names), names
    assert SECRETS[0] not in view.summary and view.summary.startswith("MCP server deploy ")


def test_the_plain_text_keeps_every_command_line_and_the_warnings() -> None:
    view = _view("echo one\nrm -rf victim2", cwd="/")
    lines = text_lines({"summary": view.summary, "risk": view.risk, "detail": view.detail, "reason": "why"})
    assert "    echo one" in lines and "    rm -rf victim2" in lines
    assert "  ! runs outside the sandbox" in lines and "  ! touches files outside the workspace" in lines
    assert "  ! network" in lines and "  in: /" in lines and "  reason: why" in lines


def test_a_bash_wrapper_is_parsed_as_its_script() -> None:
    assert parse(shlex.join(["/bin/bash", "-lc", "pytest -q"])).simple
    assert not parse(shlex.join(["/bin/bash", "-lc", "pytest -q; rm -rf /"])).simple
    assert not parse("echo a#b && rm x").simple  # a comment sign the lexer would swallow
