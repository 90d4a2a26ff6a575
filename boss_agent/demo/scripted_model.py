"""A scripted local model provider: a Responses-API server on loopback.

Codex talks to it exactly as to OpenAI (``POST {base_url}/responses``, SSE back), so
the real ``codex`` binary can run whole turns with no network and no account. The
tests, ``boss-agent up --demo`` and the benchmarks all use it.

Each model request takes the next ``Response`` from a queue (or asks a fallback
``responder``). A response can stream items, fail with an HTTP status, fail inside
the stream, stop before ``response.completed`` (a cut), or hang until released.
Every request is recorded (parsed body, headers, how its stream ended) so tests can
assert what codex sent.

The SSE shapes follow ../shared/codex-app-server-facts.md §1.2. ``write_codex_home``
writes the ``config.toml`` that points codex at the server.
"""

from __future__ import annotations

import itertools
import json
import logging
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

Event = dict[str, Any]
HANG_POLL_S = 0.05  # how often a hung stream checks for release or a closed peer
_ids = itertools.count(1)


def _next_id(prefix: str) -> str:
    return f"{prefix}_{next(_ids)}"


# ----------------------------------------------------------------------------- items


def message(text: str, chunks: Iterable[str] | None = None, *, item_id: str | None = None,
            phase: str | None = None) -> list[Event]:
    """An assistant message, streamed as ``chunks`` (default: one delta)."""
    item_id = item_id or _next_id("msg")
    pieces = list(chunks) if chunks is not None else [text]
    head: dict[str, Any] = {"type": "message", "role": "assistant", "id": item_id,
                            "content": [{"type": "output_text", "text": ""}]}
    done: dict[str, Any] = {**head, "content": [{"type": "output_text", "text": text}]}
    if phase:
        head["phase"] = done["phase"] = phase
    events: list[Event] = [{"type": "response.output_item.added", "item": head}]
    events += [{"type": "response.output_text.delta", "delta": p, "item_id": item_id} for p in pieces]
    events.append({"type": "response.output_item.done", "item": done})
    return events


def function_call(name: str, arguments: dict[str, Any] | str, call_id: str | None = None,
                  *, namespace: str | None = None) -> list[Event]:
    """A function tool call; ``namespace`` names the tool namespace (e.g. ``multi_agent_v1``)."""
    call_id = call_id or _next_id("call")
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    item: dict[str, Any] = {"type": "function_call", "id": f"fc_{call_id}", "call_id": call_id,
                            "name": name, "arguments": args}
    if namespace:
        item["namespace"] = namespace
    return [{"type": "response.output_item.done", "item": item}]


def spawn_agent(message_text: str, call_id: str | None = None) -> list[Event]:
    """The model spawns a sub-agent (the ``multi_agent_v1`` tools of an unknown model slug)."""
    return function_call("spawn_agent", {"message": message_text}, call_id, namespace="multi_agent_v1")


def wait_agent(agent_ids: list[str], call_id: str | None = None, timeout_ms: int = 60_000) -> list[Event]:
    return function_call("wait_agent", {"targets": agent_ids, "timeout_ms": timeout_ms}, call_id,
                         namespace="multi_agent_v1")


def shell_call(cmd: str, *, call_id: str | None = None, workdir: str | None = None,
               **extra: Any) -> list[Event]:
    """The model runs ``cmd`` through codex's ``exec_command`` tool.

    ``login`` defaults to False: a login shell sources the user's profile, which on a
    pyenv machine costs seconds per command and can stall a minute on pyenv's rehash
    lock when an earlier command was killed mid-rehash.
    """
    args: dict[str, Any] = {"cmd": cmd, "login": False, **extra}
    if workdir:
        args["workdir"] = workdir
    return function_call("exec_command", args, call_id)


def custom_tool_call(name: str, text: str, call_id: str | None = None) -> list[Event]:
    call_id = call_id or _next_id("call")
    item = {"type": "custom_tool_call", "call_id": call_id, "name": name, "input": ""}
    return [{"type": "response.output_item.added", "item": item},
            {"type": "response.output_item.done", "item": {**item, "input": text}}]


def apply_patch(patch: str, call_id: str | None = None) -> list[Event]:
    """A freeform ``apply_patch`` call (gpt-5.5's form); ``patch`` is the full envelope."""
    return custom_tool_call("apply_patch", patch, call_id)


def add_file_patch(path: str, lines: Iterable[str]) -> str:
    body = "".join(f"+{line}\n" for line in lines)
    return f"*** Begin Patch\n*** Add File: {path}\n{body}*** End Patch\n"


def update_plan(steps: Iterable[tuple[str, str]], explanation: str | None = None,
                call_id: str | None = None) -> list[Event]:
    """``steps`` are ``(text, status)`` with status pending / in_progress / completed."""
    args: dict[str, Any] = {"plan": [{"step": s, "status": st} for s, st in steps]}
    if explanation is not None:
        args["explanation"] = explanation
    return function_call("update_plan", args, call_id)


def reasoning(summary: Iterable[str], raw: Iterable[str] = (), item_id: str | None = None) -> list[Event]:
    item_id = item_id or _next_id("rs")
    summary, raw = list(summary), list(raw)
    events: list[Event] = [{"type": "response.output_item.added",
                            "item": {"type": "reasoning", "id": item_id, "summary": []}}]
    for index, text in enumerate(summary):
        events.append({"type": "response.reasoning_summary_part.added", "item_id": item_id,
                       "summary_index": index})
        events.append({"type": "response.reasoning_summary_text.delta", "delta": text,
                       "summary_index": index, "item_id": item_id})
    for text in raw:
        events.append({"type": "response.reasoning_text.delta", "delta": text,
                       "content_index": 0, "item_id": item_id})
    events.append({"type": "response.output_item.done", "item": {
        "type": "reasoning", "id": item_id,
        "summary": [{"type": "summary_text", "text": t} for t in summary],
        "content": [{"type": "reasoning_text", "text": "".join(raw)}] if raw else []}})
    return events


def web_search(query: str, item_id: str | None = None) -> list[Event]:
    item = {"type": "web_search_call", "id": item_id or _next_id("ws"), "status": "completed",
            "action": {"type": "search", "query": query}}
    return [{"type": "response.output_item.added", "item": item},
            {"type": "response.output_item.done", "item": item}]


# ------------------------------------------------------------------------- responses


@dataclass
class Response:
    """One answer to one model request."""

    events: list[Event] = field(default_factory=list)
    status: int = 200
    body: dict[str, Any] | None = None  # for a non-200 status
    headers: dict[str, str] = field(default_factory=dict)
    hang: bool = False  # after the events, block until released or the peer leaves
    complete: bool = True  # False: close the stream without response.completed
    delay_s: float = 0.0  # pause between events (a slow model)


USAGE = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
         "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}


def turn(*items: list[Event], usage: dict[str, Any] | None = None, delay_s: float = 0.0) -> Response:
    """A complete response carrying ``items`` (each a list from the item builders)."""
    rid = _next_id("resp")
    events: list[Event] = [{"type": "response.created", "response": {"id": rid}}]
    for item in items:
        events += item
    events.append({"type": "response.completed", "response": {"id": rid, "usage": usage or USAGE}})
    return Response(events=events, delay_s=delay_s)


def hang(*items: list[Event]) -> Response:
    """Stream ``items`` then block: for interrupt and steer tests."""
    response = turn(*items)
    response.events.pop()
    response.hang = True
    return response


def cut(*items: list[Event]) -> Response:
    """Stream ``items`` then close the connection before ``response.completed``."""
    response = turn(*items)
    response.events.pop()
    response.complete = False
    return response


def stream_failure(code: str = "server_error", message: str = "The model had an error") -> Response:
    rid = _next_id("resp")
    return Response(events=[{"type": "response.created", "response": {"id": rid}},
                            {"type": "response.failed",
                             "response": {"id": rid, "error": {"code": code, "message": message}}}])


def http_error(status: int, code: str = "server_error", message: str = "scripted failure",
               retry_after: int | None = None) -> Response:
    headers = {"retry-after": str(retry_after)} if retry_after is not None else {}
    return Response(status=status, headers=headers, body={
        "error": {"message": message, "type": code, "param": None, "code": code}})


def text_reply(text: str) -> Response:
    return turn(message(text))


# ---------------------------------------------------------------------------- server


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    stream_end: str = "pending"  # completed | cut | peer_closed | released | http_error

    def input_texts(self) -> list[str]:
        """Every text the request's ``input`` carries, in order (user, developer, assistant)."""
        texts: list[str] = []
        for entry in self.body.get("input", []):
            content = entry.get("content") if isinstance(entry, dict) else None
            if isinstance(content, str):
                texts.append(content)
            elif isinstance(content, list):
                texts += [c.get("text", "") for c in content if isinstance(c, dict) and "text" in c]
        return texts

    def tool_outputs(self) -> dict[str, str]:
        """``call_id`` → the tool output codex sent back to the model."""
        out: dict[str, str] = {}
        for entry in self.body.get("input", []):
            if isinstance(entry, dict) and entry.get("type") in ("function_call_output",
                                                                 "custom_tool_call_output"):
                output = entry.get("output")
                out[entry.get("call_id", "")] = output if isinstance(output, str) else json.dumps(output)
        return out


Responder = Callable[[RecordedRequest], Response]


def default_responder(_request: RecordedRequest) -> Response:
    return text_reply("(scripted model: nothing was queued for this request)")


class ScriptedModel:
    """The server. Use as a context manager or call ``start``/``close``."""

    def __init__(self, responder: Responder | None = None, host: str = "127.0.0.1") -> None:
        self._queue: deque[Response] = deque()
        self._responder = responder or default_responder
        self._lock = threading.Condition()
        self._release = threading.Event()
        self._closing = threading.Event()
        self.requests: list[RecordedRequest] = []
        self._server = ThreadingHTTPServer((host, 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="scripted-model",
                                        daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def start(self) -> ScriptedModel:
        self._thread.start()
        return self

    def close(self) -> None:
        self._closing.set()
        self._release.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedModel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def enqueue(self, *responses: Response) -> None:
        with self._lock:
            self._queue.extend(responses)

    def release(self) -> None:
        """Let every hung stream finish (with ``response.completed``)."""
        self._release.set()

    def wait_for_requests(self, count: int, timeout: float = 30.0) -> list[RecordedRequest]:
        """Block until ``count`` requests have arrived; raise TimeoutError otherwise."""
        with self._lock:
            if not self._lock.wait_for(lambda: len(self.requests) >= count, timeout):
                raise TimeoutError(f"scripted model saw {len(self.requests)} of {count} requests")
            return list(self.requests)

    # -- request handling (runs on the server's threads)

    def _take(self, record: RecordedRequest) -> Response:
        with self._lock:
            self.requests.append(record)
            self._lock.notify_all()
            if self._queue:
                return self._queue.popleft()
        return self._responder(record)

    def _finish(self, record: RecordedRequest, how: str) -> None:
        with self._lock:
            record.stream_end = how
            self._lock.notify_all()

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, fmt: str, *args: Any) -> None:
                logger.debug("scripted model: " + fmt, *args)

            def do_GET(self) -> None:
                self._send_json(404, {"error": {"message": "not scripted", "code": "not_found"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    body = {"_unparsed": raw.decode("utf-8", "replace")}
                record = RecordedRequest(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                if not self.path.rstrip("/").endswith("/responses"):
                    model._finish(record, "http_error")
                    self._send_json(404, {"error": {"message": "unknown path", "code": "not_found"}})
                    return
                response = model._take(record)
                if response.status != 200:
                    model._finish(record, "http_error")
                    self._send_json(response.status, response.body or {}, response.headers)
                    return
                model._finish(record, self._stream(response))

            def _send_json(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def _chunk(self, data: bytes) -> None:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

            def _stream(self, response: Response) -> str:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                try:
                    for event in response.events:
                        if response.delay_s:
                            time.sleep(response.delay_s)
                        self._chunk(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
                    if response.hang:
                        ended = self._hang()
                        if ended != "released":
                            return ended
                        self._chunk(b"event: response.completed\ndata: " + json.dumps(
                            {"type": "response.completed",
                             "response": {"id": "resp_released", "usage": USAGE}}).encode() + b"\n\n")
                    if not response.complete:
                        self.close_connection = True
                        self.connection.shutdown(socket.SHUT_RDWR)
                        return "cut"
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                    return "completed"
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True
                    return "peer_closed"

            def _hang(self) -> str:
                while not model._release.wait(HANG_POLL_S):
                    readable, _, _ = select.select([self.connection], [], [], 0)
                    if readable and not self.connection.recv(1, socket.MSG_PEEK):
                        self.close_connection = True
                        return "peer_closed"
                if model._closing.is_set():
                    self.close_connection = True
                    return "peer_closed"
                return "released"

        return Handler


def write_codex_home(home: Path, base_url: str, *, model: str = "gpt-5.5",
                     extra_toml: str = "", stream_idle_timeout_ms: int | None = None,
                     features: dict[str, bool] | None = None) -> Path:
    """Write ``home/config.toml`` pointing codex at ``base_url``; return ``home``.

    ``gpt-5.5`` gives the plain tool surface (exec_command, apply_patch, update_plan);
    retries are off so failures are deterministic (facts §0). ``shell_snapshot`` is
    off: codex snapshots a login shell for every new thread, and on a machine whose
    profile runs ``pyenv init`` each snapshot starts a rehash that outlives codex and,
    when killed, leaves pyenv's lock behind for every later login shell (60 s each).
    """
    home.mkdir(parents=True, exist_ok=True)
    idle = f"stream_idle_timeout_ms = {stream_idle_timeout_ms}\n" if stream_idle_timeout_ms else ""
    flags = {"shell_snapshot": False, **(features or {})}
    feature_lines = "".join(f"{name} = {str(on).lower()}\n" for name, on in flags.items())
    (home / "config.toml").write_text(
        f'model = "{model}"\n'
        'approval_policy = "never"\n'
        'sandbox_mode = "danger-full-access"\n'
        'model_provider = "scripted"\n'
        f"{extra_toml}\n"
        "[tools.update_plan]\nenabled = true\n\n"
        f"[features]\n{feature_lines}\n"
        "[model_providers.scripted]\n"
        'name = "boss-agent scripted model"\n'
        f'base_url = "{base_url}"\n'
        'wire_api = "responses"\n'
        "request_max_retries = 0\n"
        "stream_max_retries = 0\n"
        f"{idle}"
    )
    return home
