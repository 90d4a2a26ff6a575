"""A scripted local model provider: a Responses-API server on loopback.

Codex talks to it exactly as to OpenAI (``POST {base_url}/responses``, SSE back), so
the real ``codex`` binary can run whole turns with no network and no account. The
tests, ``boss-agent up --demo`` and the benchmarks all use it.

Each model request takes the next ``Response`` from a queue (or asks a fallback
``responder``). A response can stream items, fail with an HTTP status, fail inside
the stream, stop before ``response.completed`` (a cut), or hang until released.
Every request is recorded (parsed body, headers, how its stream ended) so tests can
assert what codex sent.

What a response can hold (messages, tool calls, plans, reasoning, sub-agents) is built
with the helpers of ``responses.py``, re-exported here so a test needs one import.
``write_codex_home`` writes the ``config.toml`` that points codex at the server.
"""

from __future__ import annotations

import json
import logging
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from boss_agent.demo.responses import (
    Event,
    Response,
    USAGE,
    add_file_patch,
    apply_patch,
    custom_tool_call,
    cut,
    function_call,
    hang,
    http_error,
    message,
    reasoning,
    shell_call,
    spawn_agent,
    stream_failure,
    text_reply,
    turn,
    update_plan,
    wait_agent,
    web_search,
)

logger = logging.getLogger(__name__)

HANG_POLL_S = 0.05  # how often a hung stream checks for release or a closed peer

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
        return type("Handler", (_Handler,), {"model": self})


class _Handler(BaseHTTPRequestHandler):
    """One model request: record it, answer with the next scripted ``Response``."""

    protocol_version = "HTTP/1.1"
    model: ScriptedModel  # set per server by ``ScriptedModel._handler_class``

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
            self.model._finish(record, "http_error")
            self._send_json(404, {"error": {"message": "unknown path", "code": "not_found"}})
            return
        response = self.model._take(record)
        if response.status != 200:
            self.model._finish(record, "http_error")
            self._send_json(response.status, response.body or {}, response.headers)
            return
        self.model._finish(record, self._stream(response))

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
        while not self.model._release.wait(HANG_POLL_S):
            readable, _, _ = select.select([self.connection], [], [], 0)
            if readable and not self.connection.recv(1, socket.MSG_PEEK):
                self.close_connection = True
                return "peer_closed"
        if self.model._closing.is_set():
            self.close_connection = True
            return "peer_closed"
        return "released"


def write_codex_home(home: Path, base_url: str, *, model: str = "gpt-5.5",
                     extra_toml: str = "", stream_idle_timeout_ms: int | None = None,
                     features: dict[str, bool] | None = None) -> Path:
    """Write ``home/config.toml`` pointing codex at ``base_url``; return ``home``.

    ``gpt-5.5`` gives the plain tool surface (exec_command, apply_patch, update_plan);
    retries are off so failures are deterministic. ``shell_snapshot`` is
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

# The builders are part of this module's API: a test or the demo needs one import.
__all__ = [
    "Event",
    "RecordedRequest",
    "Responder",
    "Response",
    "ScriptedModel",
    "USAGE",
    "add_file_patch",
    "apply_patch",
    "custom_tool_call",
    "cut",
    "default_responder",
    "function_call",
    "hang",
    "http_error",
    "message",
    "reasoning",
    "shell_call",
    "spawn_agent",
    "stream_failure",
    "text_reply",
    "turn",
    "update_plan",
    "wait_agent",
    "web_search",
    "write_codex_home",
]
