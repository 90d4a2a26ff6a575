"""The runner's pure pieces: workdir safety, policy caps, approval answers, the
collaboration summary, exec JSONL parsing and the CUA config (git facts from real git:
tests/peers/process/test_git_facts.py)."""

from __future__ import annotations

import asyncio
import os
import time
import tomllib
from pathlib import Path

import pytest

from boss_agent.errors import TaskRejected
from boss_agent.runner import collaboration, cua
from boss_agent.runner.approval_requests import approval_id, codex_answer
from boss_agent.runner.context import RunContext
from boss_agent.runner.feed import CardFeed
from boss_agent.runner.exec_backend import parse_line
from boss_agent.runner.policy import (
    SCRATCH_KEEP_S,
    Policy,
    link_scratch,
    record_thread_workdir,
    resolve_policy,
    resolve_workdir,
    sweep_scratch,
)
from boss_agent.tasks import SinkDefaults, Task
from tests.support.config import make_config


def test_a_workdir_climbing_out_of_the_workspace_is_refused(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    with pytest.raises(TaskRejected) as caught:
        resolve_workdir(Task("t", "p", workdir="../../etc"), config)
    assert caught.value.code == "workdir_not_allowed"
    with pytest.raises(TaskRejected):
        resolve_workdir(Task("t", "p", workdir="/etc"), config)


def test_a_workdir_that_is_no_usable_path_is_refused_not_a_crash(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    with pytest.raises(TaskRejected) as caught:
        resolve_workdir(Task("t", "p", workdir=str(config.workspaces[0] / "a\0b")), config)
    assert caught.value.code == "workdir_not_allowed"


def test_a_symlink_out_of_the_workspace_is_refused(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    (config.workspaces[0] / "escape").symlink_to("/etc")
    with pytest.raises(TaskRejected):
        resolve_workdir(Task("t", "p", workdir=str(config.workspaces[0] / "escape")), config)


def test_a_missing_workdir_is_refused_but_no_workdir_means_a_scratch_dir_of_the_thread(
        tmp_path: Path) -> None:
    config = make_config(tmp_path)
    with pytest.raises(TaskRejected):
        resolve_workdir(Task("t", "p", workdir=str(config.workspaces[0] / "nope")), config)
    scratch = resolve_workdir(Task("t", "p"), config)
    assert scratch.parent == (config.state_dir / "scratch").resolve() and scratch.is_dir()
    assert resolve_workdir(Task("t2", "p", codex_thread_ref="thr-1"), config).name == "thr-1"
    inner = config.workspaces[0] / "a" / "b"
    inner.mkdir(parents=True)
    assert resolve_workdir(Task("t", "p", workdir=str(inner / ".." / "b")), config) == inner


def test_a_follow_up_naming_no_folder_runs_where_its_thread_last_ran_if_that_is_allowed_now(
        tmp_path: Path) -> None:
    config = make_config(tmp_path)
    first, second = config.workspaces[0] / "a", config.workspaces[0] / "b"
    first.mkdir()
    second.mkdir()
    record_thread_workdir(config, first, "thr-1")
    follow_up = Task("t2", "p", codex_thread_ref="thr-1")
    assert resolve_workdir(follow_up, config) == first
    assert resolve_workdir(Task("t3", "p", codex_thread_ref="thr-1", workdir=str(second)), config) == second
    record_thread_workdir(config, second, "thr-1")  # the follow-up moved the thread
    assert resolve_workdir(follow_up, config) == second
    narrowed = make_config(tmp_path, workspace=first)  # the owner removed the thread's folder
    with pytest.raises(TaskRejected) as caught:
        resolve_workdir(follow_up, narrowed)
    assert caught.value.code == "workdir_not_allowed"
    scratch = resolve_workdir(Task("t4", "p"), config)  # a thread begun in a scratch dir stays there
    record_thread_workdir(config, scratch, "thr-2")
    assert resolve_workdir(Task("t5", "p", codex_thread_ref="thr-2"), narrowed) == scratch


def test_a_thread_s_link_is_made_replaced_and_left_alone_as_its_folder_goes(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    first, second = config.workspaces[0] / "a", config.workspaces[0] / "b"
    first.mkdir()
    second.mkdir()
    record_thread_workdir(config, first, "thr-1")  # no threads directory yet
    link = config.state_dir / "threads" / "thr-1"
    assert os.readlink(link) == str(first)
    made = link.lstat().st_mtime_ns
    record_thread_workdir(config, first, "thr-1")  # unchanged: not written again
    assert link.lstat().st_mtime_ns == made
    (link.parent / ".thr-1.new").symlink_to("/elsewhere")  # left by a crash mid-replace
    record_thread_workdir(config, second, "thr-1")
    assert os.readlink(link) == str(second) and not (link.parent / ".thr-1.new").is_symlink()


def test_a_task_asking_for_more_than_the_device_allows_gets_the_limit_and_a_warning(tmp_path: Path) -> None:
    config = make_config(tmp_path, **{"codex.max_sandbox": "workspace-write",
                                  "codex.max_approval_policy": "on-request",
                                  "codex.approval_modes": ["deny"]})
    policy = resolve_policy(Task("t", "p", sandbox="danger-full-access", approval_policy="never"), config)
    assert (policy.sandbox, policy.approval_policy, policy.approval_mode) == (
        "workspace-write", "on-request", "deny")
    assert len(policy.warnings) == 3
    strict = resolve_policy(Task("t", "p", sandbox="read-only", approval_policy="untrusted"), config)
    assert (strict.sandbox, strict.approval_policy) == ("read-only", "untrusted")


def test_the_approval_id_is_stable_per_codex_request_and_distinct_across_them() -> None:
    assert approval_id("t1", 1, "c", 0) == approval_id("t1", 1, "c", 0)
    assert approval_id("t1", 1, "c", 0) != approval_id("t1", 1, "c", 1)
    assert approval_id("t1", 1, "c", 0) != approval_id("t2", 1, "c", 0)


def test_decisions_become_the_answer_each_codex_request_expects() -> None:
    cmd = "item/commandExecution/requestApproval"
    assert codex_answer(cmd, {}, "accept") == ({"decision": "accept"}, "accepted")
    assert codex_answer(cmd, {}, None) == ({"decision": "decline"}, "declined")
    assert codex_answer(cmd, {}, "rm -rf /") == ({"decision": "decline"}, "declined")
    perms = {"permissions": {"network": {"enabled": True}}}
    assert codex_answer("item/permissions/requestApproval", perms, "acceptForSession") == (
        {"permissions": {"network": {"enabled": True}}, "scope": "session"}, "accepted")
    # the response schema's scope rides on a decline too (nothing granted, for this turn)
    assert codex_answer("item/permissions/requestApproval", perms, "decline")[0] == {
        "permissions": {}, "scope": "turn"}
    assert codex_answer("item/tool/requestUserInput", {}, {"answers": {"db": ["SQLite"]}})[0] == {
        "answers": {"db": {"answers": ["SQLite"]}}}
    answers = {"db": {"answers": ["Postgres"]}}
    assert codex_answer("item/tool/requestUserInput", {}, {"answers": answers}) == (
        {"answers": answers}, "accepted")
    assert codex_answer("item/tool/requestUserInput", {}, None) == ({"answers": {}}, "declined")


def test_the_collaboration_summary_holds_answers_and_plan_but_never_prompts_or_secrets() -> None:
    listing = {"data": [
        {"turnId": "u1", "item": {"type": "userMessage", "content": [{"text": "my prompt"}]}},
        {"turnId": "u1", "item": {"type": "agentMessage", "text": "working…", "phase": "commentary"}},
        {"turnId": "u1", "item": {"type": "agentMessage", "text": "Result: 42 key sk-proj-abcdefghijklmnop"}},
        {"turnId": "u1", "item": {"type": "plan", "text": "1. Do A"}},
        {"turnId": "u1", "item": {"type": "commandExecution", "aggregatedOutput": "private output"}},
    ]}
    summary = collaboration.build_summary(collaboration._items(listing))
    assert summary is not None
    assert "Result: 42" in summary and "1. Do A" in summary
    for leaked in ("my prompt", "working…", "sk-proj-abcdefghijklmnop", "private output", "u1"):
        assert leaked not in summary
    assert collaboration.build_summary([]) is None
    huge = [{"type": "agentMessage", "text": "x" * 50_000, "_turn": n} for n in range(10)]
    assert len(collaboration.build_summary(huge) or "") <= collaboration.MAX_SUMMARY_CHARS


def test_exec_jsonl_lines_that_are_not_objects_are_skipped() -> None:
    assert parse_line(b'{"type":"turn.started"}\n') == {"type": "turn.started"}
    assert parse_line(b"not json\n") is None
    assert parse_line(b"[1,2]\n") is None
    assert parse_line(b"\xff\xfe\n") is None


def test_the_cua_mcp_config_runs_the_driver_with_telemetry_off_and_only_desktop_tools() -> None:
    config = cua.mcp_config("/opt/cua-driver")
    server = config["mcp_servers.cua"]
    assert server["command"] == "/opt/cua-driver" and server["args"] == ["mcp"]
    assert server["env"] == {"CUA_DRIVER_RS_TELEMETRY_ENABLED": "0"}
    assert "DISPLAY" in server["env_vars"]
    assert {"get_desktop_state", "click"} <= set(server["enabled_tools"])


def test_the_cua_exec_overrides_are_the_same_server_in_toml() -> None:
    binary = '/opt/cua "driver"\\bin'  # quotes and a backslash survive the TOML quoting
    parsed: dict[str, object] = {}
    for override in cua.exec_overrides(binary):
        key, _, value = override.partition("=")
        assert key.startswith("mcp_servers.cua.")
        parsed[key.removeprefix("mcp_servers.cua.")] = tomllib.loads(f"v = {value}")["v"]
    assert parsed == cua.mcp_config(binary)["mcp_servers.cua"]


async def test_the_cua_health_check_fails_cleanly_without_a_display(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    binary = cua.find_driver()
    assert binary is not None, "the cua extra (cua-driver) is installed for the tests"
    health = await cua.driver_health(binary)
    assert not health.available and health.version and health.reason
    missing = await cua.driver_health(None)
    assert not missing.available and missing.reason == "cua-driver is not installed"


def test_mcp_tool_call_approvals_answer_with_an_action() -> None:
    method = "mcpServer/elicitation/request"
    assert codex_answer(method, {}, "accept") == ({"action": "accept", "content": None}, "accepted")
    assert codex_answer(method, {}, "acceptForSession")[0]["action"] == "accept"
    assert codex_answer(method, {}, None) == ({"action": "decline", "content": None}, "declined")
    assert codex_answer(method, {}, "cancel")[1] == "cancelled"


class _Feed:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict]] = []

    async def event(self, name: str, /, **params: object) -> None:
        self.events.append((name, params))


async def test_one_codex_request_is_asked_once_and_a_late_decision_is_dropped() -> None:
    import asyncio

    from boss_agent.appserver.routing import ServerRequest
    from boss_agent.runner.approval_requests import Approvals

    sent: list[tuple[object, object, object]] = []

    async def answer(request_id: object, result: object, error: object) -> None:
        sent.append((request_id, result, error))

    asked: list[object] = []
    withdrawn: list[str] = []
    release = asyncio.Event()

    class SlowSink(SinkDefaults):
        async def progress(self, card: object) -> None: ...

        async def request_approval(self, request: object) -> str:
            asked.append(request)
            await release.wait()
            return "accept"

        async def withdraw_approval(self, approval_id: str, reason: str) -> None:
            withdrawn.append(reason)

    method = "item/commandExecution/requestApproval"
    params = {"itemId": "call_1", "threadId": "t", "command": "rm -rf /tmp/x"}
    feed = _Feed()
    approvals = Approvals(task_id="t1", feed=feed, sink=SlowSink(), approval_mode="remote",  # type: ignore[arg-type]
                          timeout_s=30, workdir="/w")
    async with asyncio.TaskGroup() as tg:
        approvals.start(tg, ServerRequest(0, method, params, answer))
        approvals.start(tg, ServerRequest(0, method, params, answer))  # re-delivered after a reconnect
        while not asked:
            await asyncio.sleep(0)
        approvals.resolved(0)  # codex settled it (the turn was interrupted) before the user decided
        release.set()
    assert len(asked) == 1 and sent == []
    assert withdrawn == ["resolved"]  # the person is no longer asked
    assert [p["status"] for name, p in feed.events if name == "approval"] == ["pending", "cancelled"]
    assert "rm -rf" not in str(feed.events)


def test_codex_exec_stderr_is_masked_before_its_tail_is_cut() -> None:
    from boss_agent.runner.exec_backend import STDERR_TAIL_CHARS, stderr_tail

    secret = "sk-proj-" + "Zq8" * 30
    after = " " + "y" * 250
    # Cutting the last 300 chars first would start inside the secret, past "sk-proj-",
    # and leave a bare run of characters no rule recognises.
    assert len(after) < STDERR_TAIL_CHARS < len(after) + len(secret)
    tail = stderr_tail(("x" * 1000 + "\nerror: bad key " + secret + after).encode(), None)
    assert "Zq8Zq8" not in tail and "[redacted]" in tail
    assert tail.endswith("y" * 250) and len(tail) <= STDERR_TAIL_CHARS


def test_the_scratch_sweep_removes_only_empty_long_unused_dirs_and_their_thread_links(tmp_path: Path) -> None:
    """A phone question with no workdir leaves a scratch dir and a thread link behind;
    months of them would pile up in the state dir. An empty one unused for a week goes,
    with its link; anything Codex wrote stays, and so does a dir a task used lately."""
    config = make_config(tmp_path, "codex")
    old_empty = resolve_workdir(Task("t-old", "p"), config)
    old_kept = resolve_workdir(Task("t-kept", "p"), config)
    (old_kept / "notes.md").write_text("written by codex")
    recent = resolve_workdir(Task("t-new", "p"), config)
    link_scratch(config, old_empty, "thread-old")
    link_scratch(config, old_kept, "thread-kept")
    week_ago = time.time() - SCRATCH_KEEP_S - 60
    for path in (old_empty, old_kept):
        os.utime(path, (week_ago, week_ago))
    assert sweep_scratch(config) == 1
    scratch = config.state_dir / "scratch"
    assert sorted(p.name for p in scratch.iterdir()) == sorted(
        [old_kept.name, recent.name, "thread-kept"])
    assert (old_kept / "notes.md").read_text() == "written by codex"


def test_a_scratch_dir_a_follow_up_uses_again_counts_as_used(tmp_path: Path) -> None:
    config = make_config(tmp_path, "codex")
    first = resolve_workdir(Task("t-first", "p"), config)
    link_scratch(config, first, "thread-1")
    week_ago = time.time() - SCRATCH_KEEP_S - 60
    os.utime(first, (week_ago, week_ago))
    assert resolve_workdir(Task("t-again", "p", codex_thread_ref="thread-1"), config) == first
    assert sweep_scratch(config) == 0 and first.is_dir()


def test_a_thread_s_settings_hold_the_task_s_limits_only_when_nothing_is_looser(tmp_path: Path) -> None:
    """``thread/resume``'s report of a thread, against a workspace-write task in ``tmp_path``."""
    policy = Policy("on-request", "workspace-write", "remote")
    ctx = RunContext(Task("t", "p"), make_config(tmp_path), SinkDefaults(), asyncio.Event(), tmp_path, policy,
                     CardFeed(SinkDefaults(), backend="app_server", workdir=str(tmp_path)))
    held = {"cwd": str(tmp_path), "approvalPolicy": "on-request",
            "sandbox": {"type": "workspaceWrite", "writableRoots": [], "networkAccess": False}}
    assert ctx.limits_hold(held)
    assert not ctx.limits_hold({**held, "cwd": str(tmp_path / "elsewhere")})
    assert not ctx.limits_hold({**held, "approvalPolicy": "never"})
    assert not ctx.limits_hold({**held, "sandbox": {"type": "dangerFullAccess"}})
    assert not ctx.limits_hold({**held, "sandbox": {**held["sandbox"], "networkAccess": True}})
    assert not ctx.limits_hold({**held, "sandbox": {**held["sandbox"], "writableRoots": ["/home"]}})
    assert not ctx.limits_hold(None)
