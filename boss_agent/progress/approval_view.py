"""What a person decides on: one Codex server request as ``summary``, ``detail``, ``risk``.

The one place (style.md, "What a person decides on is built in one place") that turns
an approval or user-input request into what every surface shows: the Boss API POST,
the local page, ``boss-agent task``'s prompt and the gateway's ask-user form all render
``ApprovalView`` and nothing else; the progress card keeps its ``summary`` and ``risk``
only (a lasting record, execution-progress.md).

``detail`` (device API §6, informed consent) says exactly what accepting does: the
whole command line, every line of it, its working directory, whether it runs outside
the sandbox and with network; every path of a patch; every path of a permission with
its access and scope; an MCP tool's server, name and arguments. Strings go through
``redact.reveal``: secrets masked, home paths ``~``-relative, hidden characters as
visible escapes, nothing cut before 16 KiB (beyond it ``truncated`` and not acceptable).

``risk`` follows §6 from a real parse of the command (``shlex`` with operator
detection): ``low`` only for one simple command (no operator, redirection,
substitution or second line) in the sandbox without network; ``high`` for anything
outside the sandbox or the workspace, or truncated; ``medium`` otherwise.

A command approval in codex 0.171 is a request to run outside the sandbox: an accepted
command runs unsandboxed whether or not the model asked for escalation (measured, see
tests/peers/codex/test_approvals_consent.py), so such a command is ``escalated``,
unless codex asks only for extra permissions inside the sandbox
(``additionalPermissions``).

Pure: no I/O, no clock; the same request gives the same view.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from boss_agent.progress.tool_identity import tool_identity
from boss_agent.jsonshape import mapping
from boss_agent.redact import REVEAL_LIMIT_BYTES, reveal, sanitize_text

COMMAND = "item/commandExecution/requestApproval"
FILE_CHANGE = "item/fileChange/requestApproval"
PERMISSIONS = "item/permissions/requestApproval"
USER_INPUT = "item/tool/requestUserInput"
ELICITATION = "mcpServer/elicitation/request"
ApprovalKind = Literal["command", "fileChange", "permissions", "userInput", "elicitation", "tool"]
Risk = Literal["low", "medium", "high"]
KIND_OF: dict[str, ApprovalKind] = {
    COMMAND: "command",
    "execCommandApproval": "command",  # v1 shape, still in ServerRequest
    FILE_CHANGE: "fileChange",
    "applyPatchApproval": "fileChange",  # v1 shape
    PERMISSIONS: "permissions",
    USER_INPUT: "userInput",
    ELICITATION: "elicitation",
}
SUMMARY_NAMES = 3  # name at most this many files or programs in a summary; the rest is "+N more"
SHELLS = frozenset({"bash", "sh", "zsh", "dash", "fish"})  # `bash -lc "<script>"` is its script
# Program names are short lowercase words (pytest, git, python3.12, g++); a first word
# with capitals or odd characters looks more like a token or a path than a program.
PROGRAM_NAME = re.compile(r"[a-z0-9][a-z0-9._+-]{0,39}")
OPERATOR_CHARS = frozenset("();<>|&\n")
NO_SANDBOX = "danger-full-access"
MAX_REASON_CHARS = 200  # device API §6: Codex's stated reason, sanitized and short
MAX_QUESTIONS = 10  # request_user_input asks a handful; more is not something a phone shows
MAX_SCHEMA_CHARS = 10_000  # an MCP form has a handful of fields; a bigger one is not for a phone
MAX_NAME_CHARS = 100  # a form property's or a question's id
MAX_SUMMARY_CHARS = 200  # one line of a list or a notification; the detail has the rest
ACCEPTING = ("accept", "acceptForSession")
_CHANGE_KIND = {"add": "add", "delete": "delete", "update": "modify"}


@dataclass(frozen=True, slots=True)
class ApprovalView:
    """One request as every surface shows it (all strings already sanitized)."""

    kind: ApprovalKind
    summary: str
    risk: Risk
    detail: dict[str, Any] | None = None
    # The other fields of §6 by kind: reason, permissions (short facts), message, mode,
    # schema, url.
    extras: dict[str, Any] = field(default_factory=dict)
    questions: tuple[dict[str, Any], ...] = ()

    @property
    def acceptable(self) -> bool:
        """False when the detail had to be cut: nobody can consent to what they cannot see."""
        return not (self.detail or {}).get("truncated")


# ------------------------------------------------------------------------ the parse


@dataclass(frozen=True, slots=True)
class Parsed:
    programs: tuple[str | None, ...]  # one per simple command, None when not nameable
    operators: bool  # &&, ||, ;, |, &, a newline, a subshell
    redirection: bool  # <, >, a here-document
    substitution: bool  # $(…), `…`, $VAR, ${…}
    clean: bool  # the parse succeeded (balanced quotes) and held nothing odd (#, control chars)

    @property
    def simple(self) -> bool:
        return self.clean and len(self.programs) == 1 and not (
            self.operators or self.redirection or self.substitution)


def _odd(text: str) -> bool:
    """What the parse below cannot be trusted with: a comment sign (a shell starts a comment
    only at a word's start) or a control character other than a newline or a tab."""
    return "#" in text or any(not c.isprintable() and c not in "\n\t" for c in text)


def _lex(text: str) -> list[str] | None:
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace = " \t\r"  # a newline separates commands: keep it as a token
    lexer.whitespace_split = False
    lexer.commenters = ""  # see _odd: "a#b" is one word to a shell
    try:
        return list(lexer)
    except ValueError:  # unbalanced quotes
        return None


def _name(words: list[str]) -> str | None:
    words = [w for w in words if "=" not in w or w.startswith("=")]  # FOO=bar may carry a secret
    if not words:
        return None
    name = os.path.basename(words[0])
    if not PROGRAM_NAME.fullmatch(name) or sanitize_text(name, limit=40) != name:
        return None
    return name


_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")


def _without_heredoc_bodies(text: str) -> str:
    """The script with each here-document's body left out: its lines are data, not commands."""
    out: list[str] = []
    ends: list[str] = []
    lines = text.split("\n")
    for line in lines:
        if ends:
            if line.strip() == ends[0]:  # <<- allows leading tabs; a plain << too is judged generously
                ends.pop(0)
            continue
        out.append(line)
        ends.extend(m.group(2) for m in _HEREDOC.finditer(line))
    return "\n".join(out)


def parse(command: str | list[str]) -> Parsed:
    """The shell structure of ``command``; a ``bash -c SCRIPT`` wrapper is its script."""
    text = command if isinstance(command, str) else shlex.join(str(w) for w in command)
    tokens = _lex(text)
    if tokens is not None and len(tokens) == 3 and os.path.basename(tokens[0]) in SHELLS \
            and tokens[1].startswith("-") and "c" in tokens[1] \
            and not any(set(t) <= OPERATOR_CHARS for t in tokens):
        return parse(tokens[2])
    if "<<" in text:
        tokens = _lex(_without_heredoc_bodies(text))
    if tokens is None:
        return Parsed((None,), True, True, True, False)
    substitution = "$" in text or "`" in text
    segments: list[list[str]] = [[]]
    operators = redirection = False
    skip_next = False
    for token in tokens:
        if token and set(token) <= OPERATOR_CHARS:
            if set(token) <= set("<>") or token in (">&", "<&", "&>", ">|"):
                redirection, skip_next = True, True  # the next word is a file, not a program
                continue
            operators = True
            segments.append([])
            continue
        if skip_next:
            skip_next = False
            continue
        segments[-1].append(token)
    words = [s for s in segments if s]
    programs = tuple(_name(s) for s in words) or (None,)
    # A newline inside quotes is no separator, but a second line is never "one simple command".
    return Parsed(programs, operators or "\n" in text, redirection, substitution, not _odd(text))


# ----------------------------------------------------------------------- the paths


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def shown_path(path: str, workdir: str | None, *, home: str | None = None,
               base: str | None = None) -> tuple[str, bool]:
    """``(path as shown, outside the workspace)``: workdir-relative inside it, else
    ``~``-relative under home, else absolute; relative paths are taken from ``base``."""
    root = os.path.normpath(workdir) if workdir else None
    full = os.path.normpath(os.path.join(base or root or "/", path))
    outside = root is None or not _inside(full, root)
    text = full if outside or root is None else (os.path.relpath(full, root) if full != root else ".")
    shown, _ = reveal(text, home=home)
    return shown, outside


def _revealed(value: Any, home: str | None) -> Any:
    """A JSON value with every string (keys too) revealed; ``truncated`` marks a cut."""
    if isinstance(value, Mapping):
        return {_revealed(str(k), home): _revealed(v, home) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_revealed(v, home) for v in value]
    if isinstance(value, str):
        return reveal(value, home=home)[0]
    return value


def _fits(detail: dict[str, Any], key: str) -> dict[str, Any]:
    """Cut the list under ``key`` until the detail is at most 16 KiB; mark it truncated."""
    items = list(detail[key])
    if len(json.dumps(detail, ensure_ascii=False).encode()) <= REVEAL_LIMIT_BYTES:
        return detail
    while items and len(json.dumps({**detail, key: items}, ensure_ascii=False).encode()) > REVEAL_LIMIT_BYTES:
        items.pop()
    return {**detail, key: items, "truncated": True}


# ------------------------------------------------------------------------ the kinds


def _names_label(verb: str, noun: str, names: list[str]) -> str:
    listed = ", ".join(names[:SUMMARY_NAMES])
    more = f" +{len(names) - SUMMARY_NAMES} more" if len(names) > SUMMARY_NAMES else ""
    return f"{verb} {len(names)} {noun}s: {listed}{more}"


def _network_requested(params: Mapping[str, Any]) -> bool:
    if params.get("networkApprovalContext"):
        return True
    extra = mapping(params.get("additionalPermissions") or params.get("permissions"))
    return bool(mapping(extra.get("network")).get("enabled"))


def _command(params: Mapping[str, Any], workdir: str | None, sandbox: str | None,
             home: str | None) -> tuple[str, Risk, dict[str, Any]]:
    raw = params.get("command")
    command = raw if isinstance(raw, (str, list)) else ""
    text = command if isinstance(command, str) else shlex.join(str(w) for w in command)
    shown, truncated = reveal(text, home=home)
    cwd = params.get("cwd") if isinstance(params.get("cwd"), str) else workdir
    cwd_shown, cwd_outside = shown_path(cwd or ".", workdir, home=home)
    # codex runs an approved command without its sandbox, unless it asks for extra
    # permissions inside it (additionalPermissions); with no sandbox there is none to leave.
    escalated = not params.get("additionalPermissions") or sandbox == NO_SANDBOX
    network = escalated or _network_requested(params)
    detail: dict[str, Any] = {"command": shown, "cwd": cwd_shown, "outsideWorkspace": cwd_outside,
                              "sandbox": sandbox or "unknown", "escalated": escalated, "network": network}
    parsed = parse(command)
    if truncated:
        detail["truncated"] = True
    risk: Risk
    if truncated or escalated or cwd_outside:
        risk = "high"
    elif parsed.simple and not network:  # in the sandbox (extra permissions at most), offline
        risk = "low"
    else:
        risk = "medium"
    return _command_summary(parsed, truncated=truncated, escalated=escalated, network=network), risk, detail


def _command_summary(parsed: Parsed, *, truncated: bool, escalated: bool, network: bool) -> str:
    """"Run pytest", "Run 2 commands: ls, rm": a compound command never reads as one program."""
    names = [p or "a command" for p in parsed.programs]
    if truncated:
        return "Run a command too long to show whole (over 16 KiB)"
    notes = [note for note, present in (("with redirection", parsed.redirection and len(names) == 1),
                                         ("with substitution", parsed.substitution and len(names) == 1),
                                         ("outside the sandbox", escalated),
                                         ("with network", network and not escalated)) if present]
    head = f"Run {names[0]}" if len(names) == 1 else "Run " + _names_label("", "command", names).strip()
    return head + (f" ({', '.join(notes)})" if notes else "")


def _change_kind(kind: Any) -> str:
    kind = kind if isinstance(kind, Mapping) else {"type": kind}
    if kind.get("type") == "update" and kind.get("move_path"):
        return "move"
    return _CHANGE_KIND.get(str(kind.get("type")), "modify")


def _file_change(params: Mapping[str, Any], item: Mapping[str, Any] | None, workdir: str | None,
                 home: str | None) -> tuple[str, Risk, dict[str, Any]]:
    changes = list((item or {}).get("changes") or ())
    v1 = params.get("fileChanges")  # the v1 shape names its files itself
    if not changes and isinstance(v1, Mapping):
        changes = [{"path": str(p), "kind": mapping(c).get("type")} for p, c in v1.items()]
    files = []
    for change in changes:
        change = mapping(change)
        if not isinstance(change.get("path"), str):
            continue
        path, outside = shown_path(change["path"], workdir, home=home)
        files.append({"path": path, "kind": _change_kind(change.get("kind")), "outsideWorkspace": outside})
        move = mapping(change.get("kind")).get("move_path")
        if isinstance(move, str):  # a move writes its target too
            target, target_outside = shown_path(move, workdir, home=home)
            files.append({"path": target, "kind": "move", "outsideWorkspace": target_outside})
    detail = _fits({"files": files}, "files")
    grant_root = params.get("grantRoot")
    if isinstance(grant_root, str) and grant_root:
        detail["grantRoot"], _ = shown_path(grant_root, workdir, home=home)
    unknown = not files  # the item never named its files: nothing says they are inside
    outside = unknown or bool(grant_root) or any(f["outsideWorkspace"] for f in files)
    risk: Risk = "high" if outside or detail.get("truncated") else "medium"
    summary = _names_label("Edit", "file", [str(f["path"]) for f in files]) if files else "Edit files (not named)"
    if len(files) == 1:
        summary = f"Edit 1 file: {files[0]['path']}"
    if grant_root:
        summary += " (and allow writes outside the workdir)"
    return summary, risk, detail


def _fs_path(entry: Any, cwd: str | None, workdir: str | None, home: str | None) -> tuple[str, bool]:
    if isinstance(entry, str):
        return shown_path(entry, workdir, home=home, base=cwd)
    entry = mapping(entry)
    if isinstance(entry.get("path"), str):
        return shown_path(entry["path"], workdir, home=home, base=cwd)
    if isinstance(entry.get("pattern"), str):
        return shown_path(entry["pattern"], workdir, home=home, base=cwd)
    special = mapping(entry.get("value"))
    kind = str(special.get("kind") or "unknown")
    if kind == "project_roots":
        return reveal(f":project_roots/{special.get('subpath') or ''}".rstrip("/"), home=home)[0], False
    # root, minimal, tmpdir, slash_tmp, unknown: all of it lies outside the workspace.
    return f":{reveal(kind, home=home)[0]}", True


def _permissions(params: Mapping[str, Any], workdir: str | None,
                 home: str | None) -> tuple[str, Risk, dict[str, Any], list[str]]:
    asked = mapping(params.get("permissions"))
    cwd = params.get("cwd") if isinstance(params.get("cwd"), str) else workdir
    fs = mapping(asked.get("fileSystem"))
    entries: list[tuple[str, Any]] = [(mode, p) for mode in ("write", "read")
                                      for p in (fs.get(mode) or ()) if isinstance(fs.get(mode), list)]
    entries += [(str(mapping(e).get("access") or "read"), mapping(e).get("path"))
                for e in (fs.get("entries") or ()) if isinstance(fs.get("entries"), list)]
    listed: list[dict[str, Any]] = []
    for access, entry in entries:  # codex 0.171 names each path twice: in write/read and in entries
        path, outside = _fs_path(entry, cwd, workdir, home)
        shown = {"path": path, "access": access, "scope": "turn", "outsideWorkspace": outside}
        if shown not in listed:
            listed.append(shown)
    network = _network_requested({"permissions": asked})
    detail = _fits({"permissions": listed, "network": network}, "permissions")
    facts = (["network access"] if network else []) + [f"{p['access']}: {p['path']}" for p in detail["permissions"]]
    parts = (["network"] if network else []) + [
        f"{mode} {n} path{'' if n == 1 else 's'}" for mode in ("write", "read", "deny")
        if (n := sum(1 for p in listed if p["access"] == mode))]
    outside = any(p["outsideWorkspace"] for p in listed)
    risk: Risk = "high" if outside or detail.get("truncated") else "medium"
    return "Grant extra permissions" + (f": {', '.join(parts)}" if parts else ""), risk, detail, facts


def _tool(params: Mapping[str, Any], item: Mapping[str, Any] | None,
          home: str | None) -> tuple[str, Risk, dict[str, Any]]:
    meta = mapping(params.get("_meta"))
    server = str(params.get("serverName") or mapping(item).get("server") or "?")
    # codex before 0.169 names the tool only in its message (progress/tool_identity.py).
    tool = str(meta.get("tool_name") or mapping(item).get("tool") or tool_identity(params).name or "?")
    arguments = meta.get("tool_params") if "tool_params" in meta else mapping(item).get("arguments")
    detail: dict[str, Any] = {"server": reveal(server, home=home)[0], "tool": reveal(tool, home=home)[0],
                              "arguments": _revealed(arguments, home)}
    if len(json.dumps(detail, ensure_ascii=False).encode()) > REVEAL_LIMIT_BYTES:
        text, _ = reveal(json.dumps(detail["arguments"], ensure_ascii=False), home=home)
        detail = {**detail, "arguments": text, "truncated": True}
    hints = mapping(meta.get("tool_annotations"))
    # An MCP server runs outside codex's sandbox: high, unless the tool says it only reads.
    risk: Risk = "medium" if hints.get("readOnlyHint") and not hints.get("destructiveHint") \
        and not detail.get("truncated") else "high"
    summary = f"Use the {sanitize_text(server, limit=60)} tool {sanitize_text(tool, limit=80)}"
    return summary, risk, detail


def _schema(value: object, workdir: str | None) -> dict[str, Any] | None:
    """An MCP form's schema, its texts and property names sanitized; None when not small."""
    if not isinstance(value, dict) or len(json.dumps(value, default=str)) > MAX_SCHEMA_CHARS:
        return None

    def clean(node: object) -> object:
        if isinstance(node, dict):
            return {sanitize_text(str(k), workdir=workdir, limit=MAX_NAME_CHARS): clean(v)
                    for k, v in node.items()}
        if isinstance(node, list):
            return [clean(v) for v in node]
        return sanitize_text(node, workdir=workdir, limit=500) if isinstance(node, str) else node
    return clean(value)  # type: ignore[return-value]


def _questions(params: Mapping[str, Any], workdir: str | None) -> tuple[dict[str, Any], ...]:
    out = []
    asked = params.get("questions") or []
    for q in asked[:MAX_QUESTIONS] if isinstance(asked, list) else ():
        if not isinstance(q, dict):
            continue
        options = [{"label": sanitize_text(o.get("label", ""), workdir=workdir, limit=200),
                    "description": sanitize_text(o.get("description") or "", workdir=workdir, limit=300)}
                   for o in q.get("options") or [] if isinstance(o, dict)]
        # The contract's names (device API §6): allowOther for codex's isOther, secret for isSecret.
        out.append({"id": sanitize_text(q.get("id", ""), limit=MAX_NAME_CHARS),
                    "header": sanitize_text(q.get("header") or "", workdir=workdir, limit=100),
                    "question": sanitize_text(q.get("question") or "", workdir=workdir, limit=500),
                    "options": options, "allowOther": bool(q.get("isOther", True)),
                    "secret": bool(q.get("isSecret"))})
    return tuple(out)


def is_tool_call(method: str, params: Mapping[str, Any]) -> bool:
    """An MCP elicitation codex raises to approve one of the server's tool calls."""
    return method == ELICITATION and mapping(params.get("_meta")).get("codex_approval_kind") == "mcp_tool_call"


def build(method: str, params: Mapping[str, Any], *, workdir: str | None, sandbox: str | None = None,
          item: Mapping[str, Any] | None = None, home: str | None = None) -> ApprovalView:
    """The view of one server request.

    ``sandbox`` is the task's effective sandbox mode (None: not known, as on the card);
    ``item`` the thread item the request is about, as codex announced it before asking
    (a fileChange's ``changes``, an mcpToolCall's arguments); ``home`` defaults to ``~``.
    """
    params = params if isinstance(params, Mapping) else {}
    extras: dict[str, Any] = {}
    reason = params.get("reason") or params.get("justification")
    if isinstance(reason, str) and reason.strip():
        extras["reason"] = sanitize_text(reason, workdir=workdir, limit=MAX_REASON_CHARS)
    kind = KIND_OF.get(method, "permissions")
    detail: dict[str, Any] | None = None
    questions: tuple[dict[str, Any], ...] = ()
    if kind == "command":
        summary, risk, detail = _command(params, workdir, sandbox, home)
    elif kind == "fileChange":
        summary, risk, detail = _file_change(params, item, workdir, home)
    elif kind == "permissions":
        summary, risk, detail, extras["permissions"] = _permissions(params, workdir, home)
    elif is_tool_call(method, params):
        kind = "tool"
        summary, risk, detail = _tool(params, item, home)
    elif kind == "elicitation":
        server = sanitize_text(params.get("serverName") or "?", workdir=workdir, limit=60)
        summary, risk = f"MCP server {server} asks for input", "medium"
        mode = "url" if params.get("mode") == "url" else "form"
        extras.update(message=sanitize_text(params.get("message") or "", workdir=workdir, limit=500), mode=mode)
        if mode == "url" and isinstance(params.get("url"), str):
            extras["url"] = sanitize_text(params["url"], limit=500)
        schema = _schema(params.get("requestedSchema"), workdir) if mode == "form" else None
        if schema is not None:
            extras["schema"] = schema
    else:
        questions = _questions(params, workdir)
        count = len(params.get("questions") or [])
        summary, risk = f"Answer {count} question{'' if count == 1 else 's'}", "medium"
    if len(summary) > MAX_SUMMARY_CHARS:
        summary = summary[:MAX_SUMMARY_CHARS - 1] + "…"
    return ApprovalView(kind, summary, risk, detail, extras, questions)


# ------------------------------------------------------------------- plain-text form


def warnings(detail: Mapping[str, Any]) -> list[str]:
    """The plain warning lines of a detail (the page shows the same)."""
    out = []
    if detail.get("escalated"):
        out.append("runs outside the sandbox")
    files = detail.get("files") or detail.get("permissions") or ()
    if detail.get("outsideWorkspace") or detail.get("grantRoot") or any(
            mapping(f).get("outsideWorkspace") for f in files):
        out.append("touches files outside the workspace")
    if detail.get("network"):
        out.append("network")
    if detail.get("truncated"):
        out.append("too long to show whole: cannot be accepted")
    return out


def text_lines(approval: Mapping[str, Any]) -> list[str]:
    """What an approval asks, as plain lines (the terminal prompt and the gateway form).

    ``approval`` is the wire shape (the Boss API body): ``summary``, ``risk``,
    ``detail`` and the kind's extras. The command keeps its own lines, indented.
    """
    lines = [f"{approval.get('summary') or 'a request'} (risk: {approval.get('risk') or 'unknown'})"]
    detail = mapping(approval.get("detail"))
    lines += [f"  ! {w}" for w in warnings(detail)]
    if isinstance(detail.get("command"), str):
        lines.append("  command:")
        lines += [f"    {line}" for line in detail["command"].split("\n")]
        if detail.get("cwd") not in (None, "."):
            lines.append(f"  in: {detail['cwd']}")
    for change in detail.get("files") or ():
        change = mapping(change)
        lines.append(f"  {change.get('kind')}: {change.get('path')}")
    for permission in detail.get("permissions") or ():
        permission = mapping(permission)
        lines.append(f"  {permission.get('access')} ({permission.get('scope')}): {permission.get('path')}")
    if "tool" in detail:
        lines.append(f"  tool: {detail.get('server')} / {detail.get('tool')}")
        lines.append("  arguments: " + (detail["arguments"] if isinstance(detail.get("arguments"), str)
                                        else json.dumps(detail.get("arguments"), ensure_ascii=False, indent=1)))
    if approval.get("reason"):
        lines.append(f"  reason: {approval['reason']}")
    if not detail.get("permissions"):
        lines += [f"  asks for: {fact}" for fact in approval.get("permissions") or ()]
    if approval.get("message"):
        lines.append(f"  {approval['message']}")
    if approval.get("url"):
        lines.append(f"  open: {approval['url']}")
    return lines


def available_decisions(view: ApprovalView, offered: Iterable[str]) -> tuple[str, ...]:
    """``offered`` without the accepting decisions when the view could not be shown whole."""
    decisions = tuple(offered)
    return decisions if view.acceptable else tuple(d for d in decisions if d not in ACCEPTING) or ("decline",)
