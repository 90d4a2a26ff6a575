"""A minimal raw stdio client for the real ``codex app-server``, for recording transcripts.

Independent of ``boss_agent.appserver`` on purpose: tests of the progress card record
what codex really emits, with no boss-agent code between the binary and the reducer.
One ``RawCodex`` can host several threads; ``run_turn`` records one thread's messages
(notifications and server requests, in wire order) and answers its server requests.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from boss_agent.codexbin import child_environment, resolve_native

READ_TIMEOUT_S = 30  # one model round trip on a loaded 2-core box is well under this
CLOSE_TIMEOUT_S = 10

Message = dict[str, Any]
Answer = Callable[[Message], dict[str, Any]]


def accept(_request: Message) -> dict[str, Any]:
    return {"decision": "accept"}


def decline(_request: Message) -> dict[str, Any]:
    return {"decision": "decline"}


class CodexError(RuntimeError):
    """codex answered one of our requests with a JSON-RPC error."""


class RawCodex:
    def __init__(self, codex_bin: str, home: Path, cwd: Path) -> None:
        binary = resolve_native(codex_bin)
        env = child_environment({**binary.env, "CODEX_HOME": str(home)})
        self.proc = subprocess.Popen(
            [*binary.argv, "app-server"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, cwd=cwd, env=env, start_new_session=True)
        self._lines: queue.Queue[Message | None] = queue.Queue()
        self._backlog: deque[Message] = deque()  # read while waiting for a response
        self._next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout
        for line in self.proc.stdout:
            self._lines.put(json.loads(line))
        self._lines.put(None)

    def _take(self, deadline: float) -> Message:
        if self._backlog:
            return self._backlog.popleft()
        message = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
        if message is None:
            raise CodexError("codex app-server exited")
        return message

    def send(self, message: Message) -> None:
        assert self.proc.stdin
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self._next_id += 1
        wanted = self._next_id
        self.send({"id": wanted, "method": method, "params": params})
        deadline = time.monotonic() + READ_TIMEOUT_S
        held: list[Message] = []
        try:
            while True:
                message = self._take(deadline)
                if message.get("id") == wanted and "method" not in message:
                    if "error" in message:
                        raise CodexError(f"{method}: {message['error']}")
                    result: dict[str, Any] = message["result"]
                    return result
                held.append(message)
        finally:
            self._backlog.extendleft(reversed(held))

    def start(self) -> RawCodex:
        self.request("initialize", {"clientInfo": {"name": "card-tests", "version": "0"},
                                    "capabilities": {"experimentalApi": True}})
        self.send({"method": "initialized"})
        return self

    def start_thread(self, cwd: Path, **params: Any) -> str:
        thread_id: str = self.request("thread/start", {"cwd": str(cwd), **params})["thread"]["id"]
        return thread_id

    def record(self, thread_id: str, until: Callable[[Message], bool],
               answer: Answer | None = accept) -> list[Message]:
        """Messages for ``thread_id`` (or for no thread) up to and including ``until``.

        Server requests of the thread are recorded, then answered with ``answer``
        (``None``: left unanswered, as a user who never looks at the phone).
        """
        deadline = time.monotonic() + READ_TIMEOUT_S
        recorded: list[Message] = []
        while True:
            message = self._take(deadline)
            if "method" not in message:
                continue  # a late response to one of our requests
            params = message.get("params") or {}
            if params.get("threadId", thread_id) != thread_id:
                continue
            recorded.append(message)
            if "id" in message and answer is not None:
                self.send({"id": message["id"], "result": answer(message)})
            if until(message):
                return recorded

    def run_turn(self, thread_id: str, text: str, answer: Answer = accept) -> list[Message]:
        self.request("turn/start", {"threadId": thread_id, "input": [{"type": "text", "text": text}]})
        return self.record(thread_id, is_turn_completed, answer)

    def close(self) -> None:
        if self.proc.stdin and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=CLOSE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=CLOSE_TIMEOUT_S)


def is_turn_completed(message: Message) -> bool:
    return message.get("method") == "turn/completed"


def method_is(name: str) -> Callable[[Message], bool]:
    return lambda message: message.get("method") == name
