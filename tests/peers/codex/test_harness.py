"""The real-peer harness itself works: the pinned codex binary, driven over raw
stdio JSON lines (no boss-agent code), runs a turn against the scripted model."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
from pathlib import Path
from typing import Any

import httpx

from boss_agent.demo import scripted_model as sm
from boss_agent.codexbin import codex_version, resolve_native
from tests.conftest import PINNED_CODEX_VERSION

READ_TIMEOUT_S = 30


class RawCodex:
    """The smallest possible stdio client, independent of boss_agent.appserver."""

    def __init__(self, codex_bin: str, home: Path, cwd: Path) -> None:
        binary = resolve_native(codex_bin)
        env = {**os.environ, **binary.env, "CODEX_HOME": str(home)}
        self.proc = subprocess.Popen(
            [*binary.argv, "app-server"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, cwd=cwd, env=env, start_new_session=True,
        )
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.next_id = 0

    def _read(self) -> None:
        assert self.proc.stdout
        for line in self.proc.stdout:
            self.lines.put(json.loads(line))

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        self.send({"id": self.next_id, "method": method, "params": params})
        return self.until(lambda m: m.get("id") == self.next_id and "method" not in m)

    def until(self, predicate: Any) -> dict[str, Any]:
        while True:
            message = self.lines.get(timeout=READ_TIMEOUT_S)
            if predicate(message):
                return message

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


def test_pinned_codex_version_is_installed(codex_bin: str) -> None:
    assert codex_version(codex_bin) == PINNED_CODEX_VERSION


def test_real_codex_runs_a_turn_against_the_scripted_model(
    codex_bin: str, codex_home: Path, workdir: Path, scripted_model: sm.ScriptedModel
) -> None:
    scripted_model.enqueue(sm.turn(sm.message("Hello world!", ["Hello ", "world!"])))
    codex = RawCodex(codex_bin, codex_home, workdir)
    try:
        init = codex.request("initialize", {"clientInfo": {"name": "harness", "version": "0"}})
        assert "userAgent" in init["result"]
        codex.send({"method": "initialized"})
        thread = codex.request("thread/start", {"cwd": str(workdir)})["result"]["thread"]
        codex.request("turn/start", {"threadId": thread["id"],
                                     "input": [{"type": "text", "text": "say hello"}]})
        deltas: list[str] = []

        def collect(message: dict[str, Any]) -> bool:
            if message.get("method") == "item/agentMessage/delta":
                deltas.append(message["params"]["delta"])
            return message.get("method") == "turn/completed"

        completed = codex.until(collect)
        assert completed["params"]["turn"]["status"] == "completed"
        assert "".join(deltas) == "Hello world!"
        (request,) = scripted_model.requests
        assert request.stream_end == "completed"
        assert "say hello" in request.input_texts()
    finally:
        codex.close()


def test_scripted_model_fails_with_the_scripted_http_status(scripted_model: sm.ScriptedModel) -> None:
    scripted_model.enqueue(sm.http_error(429, "rate_limit_exceeded", retry_after=1))
    answer = httpx.post(scripted_model.base_url + "/responses", json={"input": []})
    assert answer.status_code == 429
    assert answer.headers["retry-after"] == "1"
    assert answer.json()["error"]["code"] == "rate_limit_exceeded"
    assert scripted_model.requests[0].stream_end == "http_error"


def test_the_npm_wrapper_resolves_to_the_native_binary_next_to_it(codex_bin: str) -> None:
    binary = resolve_native(codex_bin)
    assert binary.path.endswith("/bin/codex") and "vendor" in binary.path
    assert binary.env["CODEX_MANAGED_BY_NPM"] == "1"
    assert codex_version(binary.path) == PINNED_CODEX_VERSION
