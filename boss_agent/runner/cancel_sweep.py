"""Ending the commands an interrupted turn left running.

codex leaves the processes of an interrupted ``exec_command`` alive (facts 3f).
After ``turn/interrupt`` the runner kills, with their descendants:
- the processes Codex reported for this turn (``commandExecution.processId``),
- and, as a net for what Codex did not report, descendants of this daemon (the
  stdio app-server is our child) created after the turn started whose cwd lies
  inside the task's workdir. Codex itself is never a target.
A pid is only killed if the process was created after the turn started, so a
recycled pid cannot hit an unrelated process.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import psutil

from boss_agent.paths import is_inside

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


def turn_processes(pids: set[int], workdir: Path, since: float) -> list[psutil.Process]:
    """The processes to end: reported pids and stray children in the workdir, with descendants."""
    roots: dict[int, psutil.Process] = {}
    for pid in pids:
        try:
            proc = psutil.Process(pid)
        except psutil.Error:
            continue
        if _started_after(proc, since) and not _is_codex(proc):
            roots[pid] = proc
    try:
        mine = psutil.Process().children(recursive=True)
    except psutil.Error:
        mine = []
    for proc in mine:
        try:
            cwd = proc.cwd()
        except (psutil.Error, OSError):
            continue
        if _started_after(proc, since) and is_inside(cwd, workdir) and not _is_codex(proc):
            roots.setdefault(proc.pid, proc)
    found: dict[int, psutil.Process] = dict(roots)
    for proc in roots.values():
        try:
            found.update({child.pid: child for child in proc.children(recursive=True)})
        except psutil.Error:
            continue
    found.pop(os.getpid(), None)
    return list(found.values())


def kill_turn_processes(pids: set[int], workdir: Path, since: float) -> int:
    """Kill them; return how many were killed. Blocking: call via ``asyncio.to_thread``."""
    procs = turn_processes(pids, workdir, since)
    for proc in procs:
        try:
            proc.kill()
        except psutil.Error:
            continue
    _gone, alive = psutil.wait_procs(procs, timeout=KILL_WAIT_S)
    if alive:
        logger.warning("%d interrupted command process(es) did not exit", len(alive))
    return len(procs)
