"""The real-peer harness itself works: the pinned codex binary, driven over raw
stdio JSON lines (``tests/support/codex_raw.py``, no boss-agent client code), runs a
turn against the scripted model."""

from __future__ import annotations

from pathlib import Path

import httpx

from boss_agent.demo import scripted_model as sm
from boss_agent.codexbin import codex_version, resolve_native
from boss_agent.codexversion import Support, support
from tests.support.codex_raw import RawCodex


def test_the_codex_under_test_is_inside_the_supported_range(codex_release: str) -> None:
    assert support(codex_release) is Support.INSIDE


def test_real_codex_runs_a_turn_against_the_scripted_model(
    codex_bin: str, codex_home: Path, workdir: Path, scripted_model: sm.ScriptedModel
) -> None:
    scripted_model.enqueue(sm.turn(sm.message("Hello world!", ["Hello ", "world!"])))
    codex = RawCodex(codex_bin, codex_home, workdir)
    try:
        init = codex.request("initialize", {"clientInfo": {"name": "harness", "version": "0"}})
        assert "userAgent" in init
        codex.send({"method": "initialized"})
        thread_id = codex.start_thread(workdir)
        messages = codex.run_turn(thread_id, "say hello")
        deltas = [m["params"]["delta"] for m in messages if m["method"] == "item/agentMessage/delta"]
        assert messages[-1]["params"]["turn"]["status"] == "completed"
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


def test_the_npm_wrapper_resolves_to_the_native_binary_next_to_it(codex_bin: str, codex_release: str) -> None:
    binary = resolve_native(codex_bin)
    assert binary.path.endswith("/bin/codex") and "vendor" in binary.path
    assert binary.env["CODEX_MANAGED_BY_NPM"] == "1"
    assert codex_version(binary.path) == codex_release
