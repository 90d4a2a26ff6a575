"""ShutdownController in this process: real signals to ourselves, awaited as events."""

from __future__ import annotations

import asyncio
import os
import signal

from boss_agent.daemon.process import ShutdownController

EVENT_TIMEOUT_S = 10
LONG_S = 600  # a grace period no test waits out


async def _wait(event: asyncio.Event) -> None:
    await asyncio.wait_for(event.wait(), EVENT_TIMEOUT_S)


async def test_sigterm_sets_stopping_and_force_cancel_follows_after_the_grace_period():
    with ShutdownController(0.05) as shutdown:
        os.kill(os.getpid(), signal.SIGTERM)
        await _wait(shutdown.stopping)
        assert shutdown.stop_reason == "SIGTERM"
        await _wait(shutdown.force_cancel)


async def test_force_cancel_waits_for_the_grace_period():
    with ShutdownController(LONG_S) as shutdown:
        os.kill(os.getpid(), signal.SIGINT)
        await _wait(shutdown.stopping)
        # One more loop turn for anything already scheduled: nothing forces yet.
        await asyncio.sleep(0)
        assert not shutdown.force_cancel.is_set()


async def test_a_second_stop_signal_sets_force_cancel_at_once():
    with ShutdownController(LONG_S) as shutdown:
        os.kill(os.getpid(), signal.SIGINT)
        await _wait(shutdown.stopping)
        os.kill(os.getpid(), signal.SIGTERM)
        await _wait(shutdown.force_cancel)


async def test_sighup_sets_reload_without_stopping():
    with ShutdownController(LONG_S) as shutdown:
        os.kill(os.getpid(), signal.SIGHUP)
        await _wait(shutdown.reload)
        assert not shutdown.stopping.is_set()


async def test_leaving_the_controller_restores_signal_handlers_and_leaves_no_timer_or_task():
    before = asyncio.all_tasks()
    with ShutdownController(LONG_S) as shutdown:
        shutdown.request_stop("test")
        assert signal.getsignal(signal.SIGTERM) != signal.SIG_DFL
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    assert signal.getsignal(signal.SIGHUP) == signal.SIG_DFL
    assert shutdown._timer is None
    assert asyncio.all_tasks() == before


async def test_without_signal_handling_request_stop_and_force_still_work():
    with ShutdownController(LONG_S, handle_signals=False) as shutdown:
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
        shutdown.request_stop("unpaired")
        shutdown.request_stop("again")
        assert shutdown.stop_reason == "unpaired"
        shutdown.force()
        assert shutdown.force_cancel.is_set()


async def test_a_zero_grace_period_forces_on_the_next_loop_turn():
    with ShutdownController(0, handle_signals=False) as shutdown:
        shutdown.request_stop()
        await _wait(shutdown.force_cancel)
