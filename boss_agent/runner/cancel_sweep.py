"""Ending the commands an interrupted turn left running, and only those.

codex leaves the processes of an interrupted ``exec_command`` alive (facts 3f).
After ``turn/interrupt`` the runner kills, with their descendants, the processes
of this turn's command executions. codex's ``processId`` is its own session
number, not an OS pid; what identifies a command's processes is the environment
codex gives them: ``CODEX_THREAD_ID`` and ``CODEX_TOOL_CALL_ID`` (the
``commandExecution`` item id; codex sets it from 0.169 on, and before that the thread
and the turn's start time pick the commands, ``_of_turn``). Only processes in the tree of the app-server child
this daemon started are looked at:
- another task's commands, even in the same workdir, are never touched (nothing
  is picked by its cwd);
- with an app-server we did not start (a ``ws://`` or ``unix://`` URL) nothing is
  killed: its processes may be another machine's or another user's.
Codex itself is never a target, and only processes created after the turn started.
"""

from __future__ import annotations

import logging
import os

import psutil

logger = logging.getLogger(__name__)

KILL_WAIT_S = 3.0  # SIGKILL is not catchable; this only bounds reaping
CREATE_TIME_SLACK_S = 1.0  # process create_time has coarse (tick) resolution


def _is_codex(proc: psutil.Process) -> bool:
    try:
        argv = proc.cmdline()
    except (psutil.Error, OSError):
        return False
    return any(part.endswith(("/codex", "codex.js")) or part == "codex" for part in argv[:2])


def _started_after(proc: psutil.Process, since: float) -> bool:
    try:
        return proc.create_time() + CREATE_TIME_SLACK_S >= since
    except psutil.Error:
        return False


def _tree(pid: int) -> dict[int, psutil.Process]:
    try:
        return {proc.pid: proc for proc in psutil.Process(pid).children(recursive=True)}
    except psutil.Error:
        return {}


def _environ(proc: psutil.Process) -> dict[str, str]:
    try:
        return proc.environ()
    except (psutil.Error, OSError):
        return {}


def _of_turn(proc: psutil.Process, tree: dict[int, psutil.Process], thread_id: str,
             call_ids: set[str]) -> bool:
    env = _environ(proc)
    if env.get("CODEX_THREAD_ID") != thread_id:
        return False
    if "CODEX_TOOL_CALL_ID" in env:  # codex 0.169 and newer name the command
        return env["CODEX_TOOL_CALL_ID"] in call_ids
    # Older codex names only the thread. A thread runs one turn at a time, so a command
    # it started after this turn began is this turn's: the top process of the command
    # (its parent is not one of the thread's commands), not a child an earlier turn's
    # command spawned later (the caller has checked the start time).
    parent = tree.get(proc.ppid())
    return parent is None or _environ(parent).get("CODEX_THREAD_ID") != thread_id


def turn_processes(thread_id: str | None, call_ids: set[str], app_server_pid: int | None,
                   since: float) -> list[psutil.Process]:
    """This turn's command processes inside our app-server child's tree, with descendants."""
    if app_server_pid is None or not thread_id or not call_ids:
        return []
    tree = _tree(app_server_pid)
    roots = [proc for proc in tree.values()
             if _started_after(proc, since) and not _is_codex(proc) and _of_turn(proc, tree, thread_id, call_ids)]
    found: dict[int, psutil.Process] = {}
    for proc in roots:
        found[proc.pid] = proc
        found.update(_tree(proc.pid))
    found.pop(os.getpid(), None)
    return list(found.values())


def kill_turn_processes(thread_id: str | None, call_ids: set[str], app_server_pid: int | None,
                        since: float) -> int:
    """Kill them; return how many were killed. Blocking: call via ``asyncio.to_thread``."""
    if call_ids and app_server_pid is None:
        logger.info("the app-server is not our child: the turn's %d command(s) are left to it",
                    len(call_ids))
    procs = turn_processes(thread_id, call_ids, app_server_pid, since)
    for proc in procs:
        try:
            proc.kill()
        except psutil.Error:
            continue
    _gone, alive = psutil.wait_procs(procs, timeout=KILL_WAIT_S)
    if alive:
        logger.warning("%d interrupted command process(es) did not exit", len(alive))
    return len(procs)
