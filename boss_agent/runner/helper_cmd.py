"""Running a short helper command (git, gh, the CUA driver's probes) with a deadline.

One function, so every probe handles the same three outcomes the same way: the
program is missing (127), it overran its deadline (124, killed), or it finished.
"""

from __future__ import annotations

import asyncio
from pathlib import Path


async def run_probe(argv: list[str], *, timeout: float, cwd: Path | None = None,
                    env: dict[str, str] | None = None, merge_stderr: bool = False) -> tuple[int, str]:
    """``(exit code, stdout)``; never raises for a missing program or a timeout."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, cwd=cwd, env=env, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT if merge_stderr else asyncio.subprocess.DEVNULL)
    except OSError:
        return 127, ""
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        return 124, ""
    finally:
        # Also on cancellation (a daemon stopping mid-probe): a child left running
        # keeps its pipes, and its transport is then collected after the loop closed.
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    return proc.returncode or 0, out.decode(errors="replace")
