"""The device API client against a real scripted HTTP server on loopback: error
mapping, the retry classifier, Retry-After (up to the cap), no retry on 4xx, coalesced and lazily
serialized progress."""

from __future__ import annotations

import asyncio
import importlib.abc
import logging
import sys
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiohttp import web

from boss_agent.errors import BossApiError, BossUnreachable, TaskGone, Unauthorized
from boss_agent.progress.card import Card
from boss_agent.runner.feed import CardFeed
from boss_agent.sources.boss.api import USER_AGENT, BossApi
from boss_agent.sources.boss.progress import ProgressUploader
from boss_agent.sources.boss.remote_approvals import RemoteApprovals
from boss_agent.sources.boss.retry import BossApiRetry, is_retryable, parse_retry_after
from boss_agent.sources.boss.runs import BossTaskSink
from boss_agent.tasks import Task
from tests.support.waits import eventually

TOKEN = "tok_secret_abcdef123456"
DELTAS = 2_000  # answer deltas streamed through the runner's card feed
Answer = Callable[[web.Request, dict[str, Any]], web.StreamResponse]


class Script:
    """Answers each request with the next scripted answer for its path, then 200 {}."""

    def __init__(self) -> None:
        self.answers: dict[str, list[tuple[int, dict[str, Any], dict[str, str]]]] = {}
        self.seen: list[tuple[str, dict[str, Any], dict[str, str], float]] = []

    def add(self, path: str, status: int, body: dict[str, Any] | None = None, **headers: str) -> None:
        self.answers.setdefault(path, []).append((status, body or {}, headers))

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json() if request.can_read_body else {}
        self.seen.append((request.path, body, dict(request.headers), time.monotonic()))
        queue = self.answers.get(request.path, [])
        status, answer, headers = queue.pop(0) if queue else (200, {}, {})
        return web.json_response(answer, status=status, headers=headers)


@pytest.fixture
async def server() -> AsyncIterator[tuple[Script, str]]:
    script = Script()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", script.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield script, f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


class ImportWatch(importlib.abc.MetaPathFinder):
    """Notes every module name the import system searches for (it finds none)."""

    def __init__(self) -> None:
        self.searched: list[str] = []

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        self.searched.append(fullname)
        return None


def error(code: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": f"{code} happened"}}


def test_the_classifier_retries_network_408_429_and_5xx_only() -> None:
    assert is_retryable(BossUnreachable("reset"))
    for status in (408, 429, 500, 502, 503, 504):
        assert is_retryable(BossApiError(status, "x", "y"))
    for status in (400, 403, 404, 410, 422):
        assert not is_retryable(BossApiError(status, "x", "y"))
    assert not is_retryable(Unauthorized(401, "unauthorized", "revoked"))
    assert not is_retryable(ValueError())


def test_retry_after_accepts_seconds_and_http_dates() -> None:
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:10 GMT", now=1445412480.0) == 10.0
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None


async def test_5xx_and_429_are_retried_with_the_server_asked_delay_up_to_the_cap(
        server: tuple[Script, str], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="boss_agent.sources.boss.retry")
    script, url = server
    path = "/api/v1/devices/heartbeat"
    script.add(path, 503, error("busy"))
    script.add(path, 429, error("slow_down"), **{"Retry-After": "1"})
    script.add(path, 200, {"heartbeatIntervalMs": 1000, "cancelTaskIds": []})
    policy = BossApiRetry(initial_s=0.01, max_s=0.02, jitter_s=0, retry_after_cap_s=0.3)
    async with BossApi(url, device_id="dev_1", token=TOKEN, policy=policy) as api:
        answer = await api.heartbeat({"state": "idle"})
    assert answer["heartbeatIntervalMs"] == 1000
    times = [t for p, _, _, t in script.seen]
    assert len(times) == 3
    assert times[2] - times[1] >= 0.3  # the wait really happened
    # The waits the retry chose (each log line's last argument): the 503 the policy's own
    # 0.01 s; the 429 its Retry-After: 1, capped at 0.3 by the policy (not the 1 s asked).
    waits = [r.args[-1] for r in caplog.records if r.name == "boss_agent.sources.boss.retry"]
    assert waits == pytest.approx([0.01, 0.3])
    _, body, headers, _ = script.seen[0]
    assert body["deviceId"] == "dev_1"
    assert headers["Authorization"] == f"Bearer {TOKEN}" and headers["User-Agent"] == USER_AGENT


async def test_other_4xx_are_not_retried_and_401_is_unauthorized(server: tuple[Script, str]) -> None:
    script, url = server
    script.add("/api/v1/devices/heartbeat", 400, error("bad_request"))
    script.add("/api/v1/devices/heartbeat", 401, error("unauthorized"))
    script.add("/api/v1/master-agent/tasks/tsk_1/progress", 409, error("task_not_owned"))
    async with BossApi(url, device_id="d", token=TOKEN, policy=BossApiRetry.fast()) as api:
        with pytest.raises(BossApiError) as bad:
            await api.heartbeat({})
        with pytest.raises(Unauthorized) as revoked:
            await api.heartbeat({})
        with pytest.raises(TaskGone):
            await api.progress("tsk_1", 1, {})
    assert bad.value.code == "bad_request" and len(script.seen) == 3
    assert TOKEN not in str(revoked.value)


async def test_a_request_searches_for_no_module(server: tuple[Script, str]) -> None:
    """httpcore asks ``sniffio`` which async library runs, on every request: with the
    module missing, the failed import is not cached and each request searched
    ``sys.path`` again (a quarter of a millisecond of the daemon's loop per call)."""
    _, url = server
    async with BossApi(url, device_id="dev_1", token=TOKEN) as api:
        await api.heartbeat({})  # the first request may import what it needs, once
        watch = ImportWatch()
        sys.meta_path.insert(0, watch)
        try:
            await api.heartbeat({})
            await api.progress("tsk_1", 1, {"status": "running"})
        finally:
            sys.meta_path.remove(watch)
    assert watch.searched == []


async def test_an_unreachable_server_is_a_bounded_retryable_error() -> None:
    policy = BossApiRetry(initial_s=0.01, max_s=0.02, jitter_s=0, give_up_after_s=0.2)
    async with BossApi("http://127.0.0.1:9", device_id="d", token=TOKEN, policy=policy) as api:
        with pytest.raises(BossUnreachable) as exc:
            await api.heartbeat({})
    assert TOKEN not in str(exc.value)


async def test_progress_is_coalesced_in_order_and_the_last_card_always_arrives(
    server: tuple[Script, str],
) -> None:
    script, url = server
    cancel = asyncio.Event()
    async with BossApi(url, device_id="d", token=TOKEN, policy=BossApiRetry.fast()) as api:
        uploader = ProgressUploader(api, "tsk_1", cancel, min_interval_s=0.2)
        async with asyncio.TaskGroup() as tg:
            tg.create_task(uploader.run())
            for index in range(500):
                uploader.update({"n": index})
                if index % 50 == 0:
                    await asyncio.sleep(0)  # let the uploader see a stream, not one burst
            uploader.close({"n": "final"})
    uploads = [body for path, body, _, _ in script.seen if path.endswith("/progress")]
    assert 1 <= len(uploads) < 20  # 500 updates, a handful of requests
    assert [u["seq"] for u in uploads] == list(range(1, len(uploads) + 1))
    assert uploads[-1]["executionProgress"] == {"n": "final"}
    assert not cancel.is_set()


async def test_cancel_requested_or_a_lost_task_sets_the_cancel_event(server: tuple[Script, str]) -> None:
    script, url = server
    script.add("/api/v1/master-agent/tasks/tsk_1/progress", 200, {"cancelRequested": True})
    script.add("/api/v1/master-agent/tasks/tsk_2/progress", 404, error("task_not_found"))
    async with BossApi(url, device_id="d", token=TOKEN, policy=BossApiRetry.fast()) as api:
        for task_id in ("tsk_1", "tsk_2"):
            cancel = asyncio.Event()
            uploader = ProgressUploader(api, task_id, cancel, min_interval_s=0.01)
            uploader.update({"n": 1})
            uploader.close()
            await asyncio.wait_for(uploader.run(), 10)
            assert cancel.is_set()


async def test_the_runner_card_is_serialized_per_upload_not_per_delta_and_the_final_is_exact(
    server: tuple[Script, str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """CardFeed -> BossTaskSink -> ProgressUploader -> loopback HTTP: 2,000 answer deltas
    cost a handful of ``to_dict`` calls (one per upload), and the last upload is the
    runner's final card exactly."""
    serialized = 0
    to_dict = Card.to_dict

    def counting(card: Card) -> dict[str, Any]:
        nonlocal serialized
        serialized += 1
        return to_dict(card)

    monkeypatch.setattr(Card, "to_dict", counting)
    script, url = server
    cancel = asyncio.Event()
    task = Task(task_id="tsk_1", prompt="p")
    async with BossApi(url, device_id="d", token=TOKEN, policy=BossApiRetry.fast()) as api:
        uploader = ProgressUploader(api, "tsk_1", cancel, min_interval_s=0.2)
        feed = CardFeed(BossTaskSink(task, uploader, RemoteApprovals(api, 1.0), cancel),
                        backend="app_server", workdir=None)
        async with asyncio.TaskGroup() as tg:
            tg.create_task(uploader.run())
            await feed.feed({"method": "turn/started", "params": {"turn": {"id": "t", "status": "inProgress"}}})
            for index in range(DELTAS):
                await feed.feed({"method": "item/agentMessage/delta", "params": {"delta": f" w{index}"}})
                if index % 50 == 0:
                    await asyncio.sleep(0)  # the uploader runs between messages, as in the daemon
            await feed.event("finished", status="completed", at="2026-01-01T00:00:00.000Z")
            serialized_by_stream = serialized
            uploader.close()
    uploads = [body for path, body, _, _ in script.seen if path.endswith("/progress")]
    assert serialized_by_stream <= len(uploads) < DELTAS // 100  # per upload, never per delta
    assert uploads[-1]["executionProgress"] == to_dict(feed.card)
    assert uploads[-1]["executionProgress"]["status"] == "completed"
    assert uploads[-1]["executionProgress"]["answerPreview"].endswith(f" w{DELTAS - 1}")


async def test_the_first_card_waits_one_window_so_no_upload_races_the_turn_start(
    server: tuple[Script, str],
) -> None:
    """The claim already made the task ``running`` on the server; the first card goes
    out after one coalescing window (or at close), not while the runner starts the turn."""
    script, url = server
    async with BossApi(url, device_id="d", token=TOKEN, policy=BossApiRetry.fast()) as api:
        uploader = ProgressUploader(api, "tsk_1", asyncio.Event(), min_interval_s=60.0)
        async with asyncio.TaskGroup() as tg:
            tg.create_task(uploader.run())
            await asyncio.sleep(0)  # the uploader waits for its first card
            uploader.update({"status": "running"})
            for _ in range(3):
                await asyncio.sleep(0)  # it has seen the card (and, unfixed, started sending it)
            uploader.close({"status": "completed"})
    uploads = [body["executionProgress"] for path, body, _, _ in script.seen if path.endswith("/progress")]
    assert uploads == [{"status": "completed"}]


async def test_the_first_card_with_visible_answer_words_goes_out_at_once_then_uploads_coalesce(
    server: tuple[Script, str],
) -> None:
    """What the person waits for (bench row 13): the first words of the answer are not
    held for the coalescing window; the cards after them are, as before."""
    script, url = server

    def uploads() -> list[dict[str, Any]]:
        return [body["executionProgress"] for path, body, _, _ in script.seen if path.endswith("/progress")]

    async with BossApi(url, device_id="d", token=TOKEN, policy=BossApiRetry.fast()) as api:
        # A window far longer than the test's wait: only the first-words rule can send early.
        uploader = ProgressUploader(api, "tsk_1", asyncio.Event(), min_interval_s=600.0)
        feed = CardFeed(BossTaskSink(Task(task_id="tsk_1", prompt="p"), uploader,
                                     RemoteApprovals(api, 1.0), asyncio.Event()),
                        backend="app_server", workdir=None)
        async with asyncio.TaskGroup() as tg:
            tg.create_task(uploader.run())
            await feed.feed({"method": "turn/started", "params": {"turn": {"id": "t", "status": "inProgress"}}})
            await feed.feed({"method": "item/agentMessage/delta", "params": {"delta": "Hel"}})  # no word yet
            await feed.feed({"method": "item/agentMessage/delta", "params": {"delta": "lo there"}})
            first = await eventually(uploads, timeout=10.0)
            for index in range(20):
                await feed.feed({"method": "item/agentMessage/delta", "params": {"delta": f" w{index}"}})
            for _ in range(3):
                await asyncio.sleep(0)  # the uploader has seen the newer cards (and must hold them)
            during_window = len(uploads())
            await feed.event("finished", status="completed", at="2026-01-01T00:00:00.000Z")
            uploader.close()
    assert [card["answerPreview"] for card in first] == ["Hello"]  # the settled words, at once
    assert during_window == 1  # the next cards wait for the window
    assert len(uploads()) == 2 and uploads()[-1]["status"] == "completed"
