"""What the person waits for: the approval round trip (row 12) and the first words (row 13).

    python -m bench.bench_waits [--samples 10]

Everything runs in this one process on loopback, with the real codex app-server and
the scripted model: the local control plane (``ControlPlane``) with a real ``Daemon``
paired to it, and a real redis-server with a ``Gateway`` worker on the real runner.

* **12 approval round trip.** The model makes codex ask a command approval (a shell
  call that needs escalation). The time is taken inside boss-agent's app-server
  client, from the moment codex's server request was read to the moment its answer
  was written back, with a server that decides at once: through the Boss API the
  control plane accepts the approval the moment the device creates it; through the
  gateway the by-framework SDK client answers the form with a RESUME the moment it
  reads it. The floor is what the transport alone costs, measured in the same run
  with payloads of the same size: for the Boss API two loopback HTTP round trips (the
  device's create and its poll), for the gateway two Redis stream hand-offs (the
  form event to a blocked XREAD, the RESUME to a blocked XREADGROUP).
* **13 first visible words.** From the control plane's claim answer to the first
  progress upload whose card shows words of the answer, against the bare client's
  time from sending ``turn/start`` to the first ``item/agentMessage/delta`` on an
  app-server of its own, the same model streaming the same answer. Samples alternate.
  The daemon runs as installed, so a task takes the thread made ahead after the task
  before it (runner/thread_ahead.py) and codex's ``thread/start`` is off its path; the
  row says how many did. Before each half the daemon is left idle until that thread is
  made, so codex never works for one half during the other. The bare client's
  ``thread/start`` is timed too and printed beside it.

The bench waits for each task's end through the control plane's own completion (never
a poll): a poll every few milliseconds would load the very loop the daemon runs on.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import redis.asyncio as aioredis
from aiohttp import web

from bench.bench_daemon import TaskEnds, codex_bin
from bench.bench_gateway import _free_port, _start_redis
from bench.bench_runner import Env, bare_turn, task_limits
from boss_agent.appserver.client import AppServer
from boss_agent.appserver.routing import ServerRequest
from boss_agent.config import Config, load_config
from boss_agent.controlplane import ControlPlane
from boss_agent.daemon.runtime import Daemon
from boss_agent.demo import scripted_model as sm
from boss_agent.runner import Runner
from boss_agent.runner.approval_requests import APPROVAL_METHODS
from boss_agent.sources.boss.pairing import pair_device
from boss_agent.sources.gateway import Gateway, GatewayTiming
from boss_agent.sources.gateway.retry import FAST_POLICY

SAMPLES = 20  # approvals per path; thread/start and fsync times spread a lot on a shared machine
WORD_PAIRS = 40  # row 13's pairs: one pair spreads by several ms, 20 left the median ±1.5 ms
WARMUP = 1  # a fresh app-server's first thread is slower; every path discards its first
WORDS = ("first ", "words ", "of ", "the ", "answer ", "arrive ", "one ", "by ", "one")
DELTA_GAP_S = 0.01  # between SSE events: the words arrive apart, so coalescing would show
APPROVE = "bench approval"  # the prompt that makes the scripted model ask for a command
AGENT = "bench_waits"
DONE_TIMEOUT_S = 60.0  # one task against the scripted model takes well under a second
DAEMON_READY_S = 60.0  # pairing, codex start-up and the first claim
FLOOR_SAMPLES = 200  # loopback round trips are ~0.1-1 ms; many, for a steady median
BLOCK_MS = 5_000  # the floor's blocked readers; a hand-off on loopback takes well under a ms


def _responder(request: sm.RecordedRequest) -> sm.Response:
    """Answers ``APPROVE`` tasks with an escalated shell call, then a short message; any
    other prompt with ``WORDS`` streamed ``DELTA_GAP_S`` apart."""
    if any(APPROVE in text for text in request.input_texts()):
        if request.tool_outputs():
            return sm.turn(sm.message("approved and ran"))
        return sm.turn(sm.shell_call("echo bench-approved", sandbox_permissions="require_escalated",
                                     justification="the bench asks before it runs a command"))
    return sm.turn(sm.message("".join(WORDS), WORDS), delay_s=DELTA_GAP_S)


# ------------------------------------------------------------------ boss-agent's own clock


class ApprovalClock:
    """Times each approval request inside our app-server client: read -> answer written.

    ``ServerRequest`` is made the moment the reader parsed codex's line; ``respond``
    returns once the answer is written to codex's stdin. Patched for the bench only.
    """

    def __init__(self) -> None:
        self.times: list[float] = []

    @contextlib.contextmanager
    def installed(self) -> Any:
        init, respond = ServerRequest.__init__, ServerRequest.respond
        clock = self

        def stamped_init(request: ServerRequest, *args: Any, **kwargs: Any) -> None:
            init(request, *args, **kwargs)
            request.bench_read_at = time.perf_counter()  # type: ignore[attr-defined]

        async def timed_respond(request: ServerRequest, result: dict[str, Any]) -> None:
            await respond(request, result)
            if request.method in APPROVAL_METHODS:
                clock.times.append(time.perf_counter() - request.bench_read_at)  # type: ignore[attr-defined]

        ServerRequest.__init__ = stamped_init  # type: ignore[method-assign]
        ServerRequest.respond = timed_respond  # type: ignore[method-assign]
        try:
            yield self
        finally:
            ServerRequest.__init__ = init  # type: ignore[method-assign]
            ServerRequest.respond = respond  # type: ignore[method-assign]


def _ms(values: list[float]) -> float:
    return round(statistics.median(values) * 1000, 2)


# ------------------------------------------------------------------ the control plane side


class Plane:
    """The control plane's core, watched: claim answers, uploads that show words, and
    approvals accepted the moment the device creates them."""

    def __init__(self, cp: ControlPlane) -> None:
        self.cp = cp
        self.claimed: dict[str, float] = {}
        self.first_words: dict[str, float] = {}
        self.create_bytes: list[int] = []
        self.poll_bytes: list[int] = []
        self.ends = TaskEnds(cp)  # the bench waits for an end without polling the daemon's loop
        core = cp.core
        claim, progress, create, wait = core.claim, core.progress, core.create_approval, core.wait_approval

        async def watched_claim(device_id: str, slots: int, wait_s: float) -> list[dict[str, Any]]:
            tasks = await claim(device_id, slots, wait_s)
            for task in tasks:
                self.claimed[task["taskId"]] = time.perf_counter()
            return tasks

        def watched_progress(device_id: str, task_id: str, seq: int, card: dict[str, Any],
                             refs: dict[str, str] | None = None) -> bool:
            if card.get("answerPreview") and task_id not in self.first_words:
                self.first_words[task_id] = time.perf_counter()
            return progress(device_id, task_id, seq, card, refs)

        def deciding_create(device_id: str, task_id: str, request: dict[str, Any]) -> None:
            create(device_id, task_id, request)
            self.create_bytes.append(len(json.dumps(request)))
            core.decide(task_id, request["approvalId"], "accept")  # a server that decides at once

        async def measured_wait(device_id: str, task_id: str, approval_id: str,
                                wait_s: float) -> dict[str, Any]:
            answer = await wait(device_id, task_id, approval_id, wait_s)
            self.poll_bytes.append(len(json.dumps(answer)))
            return answer

        core.claim = watched_claim  # type: ignore[method-assign]
        core.progress = watched_progress  # type: ignore[method-assign]
        core.create_approval = deciding_create  # type: ignore[method-assign]
        core.wait_approval = measured_wait  # type: ignore[method-assign]

    async def run(self, prompt: str, workdir: Path) -> str:
        task_id = self.cp.submit_task(prompt, workdir=str(workdir))
        view = await self.ends.wait(task_id, DONE_TIMEOUT_S)
        if view["status"] != "completed":
            raise RuntimeError(f"bench task {view['status']}: {view.get('result')}")
        return task_id


@contextlib.asynccontextmanager
async def _daemon(config: Config, cp: ControlPlane, home: Path) -> AsyncIterator[Daemon]:
    await pair_device(config.state_dir, cp.url, cp.create_pairing_code())
    daemon = Daemon(config, codex_home=home, env={"CODEX_HOME": str(home)}, handle_signals=False)
    ready = asyncio.Event()
    async with asyncio.TaskGroup() as tg:
        job = tg.create_task(daemon.run(ready))
        async with asyncio.timeout(DAEMON_READY_S):
            await ready.wait()
        try:
            yield daemon
        finally:
            daemon.request_stop()
            await asyncio.wait_for(job, DAEMON_READY_S)


# ------------------------------------------------------------------ the floors


async def http_floor(create_bytes: int, poll_bytes: int, samples: int = FLOOR_SAMPLES) -> dict[str, float]:
    """Two loopback HTTP round trips of the approval's sizes: a POST of the create body,
    a GET answered with the poll's body; aiohttp serves, httpx asks (as the device does)."""
    answer = json.dumps({"pad": "x" * max(0, poll_bytes - 11)})

    async def create(request: web.Request) -> web.Response:
        await request.read()
        return web.json_response({})

    async def poll(_request: web.Request) -> web.Response:
        return web.Response(text=answer, content_type="application/json")

    app = web.Application()
    app.router.add_post("/create", create)
    app.router.add_get("/poll", poll)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    body = json.dumps({"pad": "x" * max(0, create_bytes - 11)})
    posts, gets = [], []
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            for i in range(samples + WARMUP):
                start = time.perf_counter()
                await client.post("/create", content=body, headers={"content-type": "application/json"})
                middle = time.perf_counter()
                await client.get("/poll")
                if i >= WARMUP:
                    posts.append(middle - start)
                    gets.append(time.perf_counter() - middle)
    finally:
        await runner.cleanup()
    return {"floor_ms": round(_ms(posts) + _ms(gets), 3), "post_ms": _ms(posts), "get_ms": _ms(gets)}


async def _handoff(redis: aioredis.Redis, stream: str, payload: str, group: str | None) -> float:
    """XADD -> a reader blocked on ``stream`` (XREAD, or XREADGROUP with ``group``) has it."""
    async def read() -> float:
        async with aioredis.Redis(connection_pool=redis.connection_pool) as reader:
            if group:
                await reader.xreadgroup(group, "floor", {stream: ">"}, count=1, block=BLOCK_MS)
            else:
                await reader.xread({stream: "$"}, count=1, block=BLOCK_MS)
        return time.perf_counter()

    async with asyncio.TaskGroup() as tg:
        got = tg.create_task(read())
        await asyncio.sleep(0.001)  # let the reader block first (its XREAD is on the wire)
        start = time.perf_counter()
        await redis.xadd(stream, {"data": payload})
    return got.result() - start


async def redis_floor(url: str, event_bytes: int, resume_bytes: int, samples: int = FLOOR_SAMPLES) -> dict[str, float]:
    """Two Redis stream hand-offs of the gateway's sizes: the form event, the RESUME."""
    redis = aioredis.Redis.from_url(url)
    await redis.xgroup_create("bench:floor:ctrl", "floor", id="$", mkstream=True)
    events, resumes = [], []
    try:
        for i in range(samples + WARMUP):
            event = await _handoff(redis, "bench:floor:data", "x" * event_bytes, None)
            resume = await _handoff(redis, "bench:floor:ctrl", "x" * resume_bytes, "floor")
            if i >= WARMUP:
                events.append(event)
                resumes.append(resume)
    finally:
        await redis.delete("bench:floor:data", "bench:floor:ctrl")
        await redis.aclose()
    return {"floor_ms": round(_ms(events) + _ms(resumes), 3), "event_ms": _ms(events), "resume_ms": _ms(resumes)}


# ------------------------------------------------------------------ the gateway side


async def _gateway_approvals(config: Config, env: Env, app: AppServer, url: str,
                             samples: int) -> dict[str, Any]:
    """Approval tasks through a Gateway worker; the SDK client RESUMEs each form at once."""
    from by_framework.client.client import GatewayClient
    from by_framework.core.registry import WorkerRegistry

    gateway_config = load_config(overrides={
        "gateway.redis_url": url, "gateway.agent_types": [AGENT], "state_dir": str(config.state_dir),
        "workspaces": [str(w) for w in config.workspaces], "codex.bin": config.codex.bin,
        "codex.thread_ahead": False}, environ={})  # 12b measures the approval alone
    runner = Runner(gateway_config, app, codex_home=env.home, env={"CODEX_HOME": str(env.home)})
    gateway = Gateway(gateway_config, runner, worker_id="bench-waits", max_concurrent=2,
                      timing=GatewayTiming(), retry=FAST_POLICY)
    redis = aioredis.Redis.from_url(url, decode_responses=True)
    client = GatewayClient(registry=WorkerRegistry(redis), redis_client=redis)
    sizes: dict[str, list[int]] = {"event": [], "resume": []}
    ready = asyncio.Event()
    try:
        async with asyncio.TaskGroup() as tg:
            job = tg.create_task(gateway.run(ready))
            async with asyncio.timeout(DAEMON_READY_S):
                await ready.wait()
            for index in range(samples + WARMUP):
                await _one_gateway_approval(redis, client, f"bench-{index}", env.workdir, sizes)
            job.cancel()
    finally:
        await redis.aclose()
    return {"event_bytes": int(statistics.median(sizes["event"])),
            "resume_bytes": int(statistics.median(sizes["resume"]))}


FORM_CONTENT_TYPE = "3013"  # the ask-user form event (docs/gateway-protocol.md)
CONTROL_STREAMS = (f"byai_gateway:ctrl:agent_type:{AGENT}", "byai_gateway:ctrl:worker:bench-waits")


async def _resume_bytes(redis: aioredis.Redis) -> int:
    """The size of the RESUME the SDK just wrote (to the agent type's or the worker's stream)."""
    for stream in CONTROL_STREAMS:
        for _, fields in await redis.xrevrange(stream, count=1):
            if json.loads(fields["data"]).get("action_type") == "RESUME":
                return len(fields["data"])
    raise RuntimeError("the SDK's RESUME is on neither control stream")


async def _one_gateway_approval(redis: aioredis.Redis, client: Any, message_id: str, workdir: Path,
                                sizes: dict[str, list[int]]) -> None:
    session = f"s-{message_id}"
    stream = f"byai_gateway:session:{session}:data_stream"
    answered = False
    sent = await client.send_message(AGENT, session, APPROVE, message_id=message_id, trace_id="bench",
                                     extra_payload={"workdir": str(workdir)})
    if not sent.success:
        raise RuntimeError(f"the ASK was refused: {sent.error}")
    last = "0"
    async with asyncio.timeout(DONE_TIMEOUT_S):
        while True:
            for _, entries in await redis.xread({stream: last}, block=BLOCK_MS, count=100) or ():
                for entry_id, fields in entries:
                    last = entry_id
                    event = json.loads(fields["data"])
                    data = event.get("data") or {}
                    if not answered and data.get("contentType") == FORM_CONTENT_TYPE:
                        answered = True
                        form = json.loads(data["choices"][0]["delta"]["content"])
                        resume = {"status": "COMPLETED",
                                  "reply_data": {"formId": form["formId"], "decision": "accept"}}
                        await client.send_message(AGENT, session, "", action_type="RESUME",
                                                  message_id=message_id, extra_payload=resume)
                        sizes["event"].append(len(fields["data"]))
                        sizes["resume"].append(await _resume_bytes(redis))
                    if event.get("event_type") == "appStreamResponse":
                        if not answered:
                            raise RuntimeError("the gateway task ended without asking")
                        return


# ------------------------------------------------------------------ row 13's peer


async def _bare_first_delta(app: AppServer, env: Env) -> tuple[float, float]:
    """The bare client: (``turn/start`` sent -> the turn's first answer delta, its
    ``thread/start`` alone), same limits."""
    limits = task_limits(env)
    client = await app.client()
    began = time.perf_counter()
    thread = (await client.thread_start(cwd=str(env.workdir), **limits["thread_params"]))["thread"]["id"]
    thread_s = time.perf_counter() - began
    first: float | None = None
    async with client.listen(thread) as listener:
        start = time.perf_counter()
        await client.turn_start(thread, [{"type": "text", "text": "words"}], **limits["turn_params"])
        async for note in listener:
            if note.method == "item/agentMessage/delta" and first is None:
                first = time.perf_counter()
            if note.method == "turn/completed":
                break
    if first is None:
        raise RuntimeError("the bare turn streamed no answer delta")
    return first - start, thread_s


# ------------------------------------------------------------------ the run


@contextlib.asynccontextmanager
async def _world() -> AsyncIterator[tuple[Env, Config]]:
    with tempfile.TemporaryDirectory(prefix="bench-waits-") as tmp, sm.ScriptedModel(responder=_responder) as model:
        root = Path(tmp)
        workdir = root / "work"
        workdir.mkdir()
        home = sm.write_codex_home(root / "codex-home", model.base_url)
        (root / "config.toml").touch()
        config = load_config(root / "config.toml", overrides={
            "state_dir": str(root / "state"), "workspaces": [str(root)], "codex.bin": codex_bin()}, environ={})
        yield Env(config.codex.bin, home, workdir, config), config


async def _alternate(count: int, *steps: Callable[[int], Awaitable[None]]) -> None:
    for index in range(count):
        for step in steps if index % 2 == 0 else reversed(steps):
            await step(index)


async def run(samples: int = SAMPLES, word_pairs: int = WORD_PAIRS) -> dict[str, Any]:
    clock = ApprovalClock()
    async with _world() as (env, config):
        root = Path(config.state_dir).parent
        with clock.installed():
            async with ControlPlane(root / "cp" / "boss.db") as cp, _daemon(config, cp, env.home) as daemon:
                plane = Plane(cp)
                words: list[float] = []
                bare: list[float] = []
                threads: list[float] = []  # the bare client's thread/start: codex's own share of row 13
                on_ahead: list[bool] = []  # whether each measured task ran on the thread made ahead
                async with env.app_server() as app:
                    async def idle() -> None:
                        # Before each half, the daemon is idle: the thread it makes ahead
                        # after a task (runner/thread_ahead.py, on by default) is made, and
                        # codex works on neither half's behalf during the other.
                        assert daemon.runner is not None
                        await daemon.runner.ahead.settled()

                    async def daemon_words(index: int) -> None:
                        await idle()
                        assert daemon.runner is not None
                        held = daemon.runner.ahead.held
                        task_id = await plane.run("words", env.workdir)
                        if index >= WARMUP:
                            words.append(plane.first_words[task_id] - plane.claimed[task_id])
                            on_ahead.append(held is not None and cp.task(task_id).get("codexThreadRef") == held)

                    async def bare_words(index: int) -> None:
                        await idle()
                        if index == 0:
                            await bare_turn(app, env, **task_limits(env))  # the peer's own warm-up
                        delta, thread_s = await _bare_first_delta(app, env)
                        if index >= WARMUP:
                            bare.append(delta)
                            threads.append(thread_s)

                    await _alternate(word_pairs + WARMUP, daemon_words, bare_words)
                boss_approvals = clock.times[:]
                for _ in range(samples + WARMUP):
                    await plane.run(APPROVE, env.workdir)
                boss_approvals = clock.times[len(boss_approvals) + WARMUP:]
                http = await http_floor(int(statistics.median(plane.create_bytes)),
                                        int(statistics.median(plane.poll_bytes)))
            port = _free_port()
            url = f"redis://127.0.0.1:{port}/0"
            server = _start_redis(port, str(root))
            try:
                before = len(clock.times)
                async with AppServer.from_config(config, codex_home=env.home) as app:
                    sizes = await _gateway_approvals(config, env, app, url, samples)
                gateway_approvals = clock.times[before + WARMUP:]
                floor = await redis_floor(url, sizes["event_bytes"], sizes["resume_bytes"])
            finally:
                server.kill()
                server.wait()
    boss_ms, gateway_ms = _ms(boss_approvals), _ms(gateway_approvals)
    words_ms, bare_ms = _ms(words), _ms(bare)
    return {
        "approval_boss_ms": boss_ms, "approval_boss_floor_ms": http["floor_ms"],
        "approval_boss_added_ms": round(boss_ms - http["floor_ms"], 2), "http_floor": http,
        "approval_gateway_ms": gateway_ms, "approval_gateway_floor_ms": floor["floor_ms"],
        "approval_gateway_added_ms": round(gateway_ms - floor["floor_ms"], 2), "redis_floor": floor,
        "first_words_ms": words_ms, "bare_first_delta_ms": bare_ms,
        # Inside boss-agent's time and not the peer's: codex making the task's thread.
        "bare_thread_start_ms": _ms(threads), "word_pairs": word_pairs,
        "words_on_thread_ahead": sum(on_ahead),
        # The median of the per-pair differences: each pair ran back to back.
        "first_words_added_ms": round(statistics.median(w - b for w, b in zip(words, bare, strict=True)) * 1000, 2),
        # The spread, for a reader who wants more than the median (ms, sorted).
        "approval_boss_samples_ms": sorted(round(t * 1000, 2) for t in boss_approvals),
        "approval_gateway_samples_ms": sorted(round(t * 1000, 2) for t in gateway_approvals),
        "samples": samples,
    }


def main() -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=SAMPLES, help="samples per path")
    args = parser.parse_args()
    logging.getLogger("boss_agent").setLevel(logging.ERROR)
    result = asyncio.run(run(args.samples))
    for key, value in result.items():
        print(f"{key:28} {value}")
    return result


if __name__ == "__main__":
    main()
