"""Progress-card reducer throughput next to plain ``json.loads``, in one run.

    python -m bench.bench_card

Builds a 50k-message transcript from the real-codex fixture
``tests/fixtures/transcript_mixed.jsonl`` (one turn that reasons, plans, runs a command,
patches a file and streams a 400-delta answer), repeated with fresh ids, so it is
dominated by ``item/agentMessage/delta`` as real tasks are. Then measures, on the same
lines:

* ``json.loads`` of every line (the floor: the client has to parse them anyway);
* ``reduce`` of every message plus ``to_dict`` + ``json.dumps`` of the card every
  ``SERIALIZE_EVERY`` messages. The runner does not serialize per message: it uploads
  the card coalesced, so serializing every 50 messages is already pessimistic.

Prints the ratio (goal: reducer + serializer ≤ 3× the JSON parse) and returns a dict.
Takes a few seconds.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from boss_agent.progress.card import new_card
from boss_agent.progress.reducer import reduce

FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "transcript_mixed.jsonl"
MESSAGES = 50_000
SERIALIZE_EVERY = 50  # an upload per 50 messages is more often than the runner's coalescing
SERIALIZE_SAMPLES = 2000
ROUNDS = 5  # best of five, the two paths alternating: the box is shared, the minimum is the least disturbed run
ID_KEYS = ('"id": "', '"itemId": "', '"turnId": "', '"requestId": "')


def synthesize(count: int = MESSAGES) -> list[str]:
    """``count`` JSON lines: the fixture turn again and again, each copy with its own ids."""
    template = FIXTURE.read_text().splitlines()
    lines: list[str] = []
    copy = 0
    while len(lines) < count:
        for line in template:
            for key in ID_KEYS:
                line = line.replace(key, f"{key}r{copy}-")
            lines.append(line)
        copy += 1
    return lines[:count]


def _json_only(lines: list[str]) -> float:
    start = time.perf_counter()
    for line in lines:
        json.loads(line)
    return time.perf_counter() - start


def _serialize_cost(messages: list[dict[str, Any]], samples: int = SERIALIZE_SAMPLES) -> float:
    """Seconds for one ``to_dict`` + ``json.dumps`` of a card mid-stream (answer growing)."""
    card = new_card(workdir="/tmp/bench-work")
    for message in messages[:400]:
        card = reduce(card, message)
    start = time.perf_counter()
    for index in range(samples):
        # A new delta each time, as while streaming: the answer preview is never cached.
        card = reduce(card, {"method": "item/agentMessage/delta", "params": {"delta": f" w{index}"}})
        json.dumps(card.to_dict())
    return (time.perf_counter() - start) / samples


def _reduce_and_serialize(messages: list[dict[str, Any]]) -> tuple[float, int]:
    card = new_card(workdir="/tmp/bench-work", now="2026-11-30T00:00:00Z")
    uploads = 0
    start = time.perf_counter()
    for index, message in enumerate(messages, 1):
        card = reduce(card, message)
        if index % SERIALIZE_EVERY == 0:
            json.dumps(card.to_dict())
            uploads += 1
    return time.perf_counter() - start, uploads


def run(count: int = MESSAGES, rounds: int = ROUNDS,
        serialize_samples: int = SERIALIZE_SAMPLES) -> dict[str, Any]:
    lines = synthesize(count)
    messages = [json.loads(line) for line in lines]
    deltas = sum(1 for m in messages if m.get("method") == "item/agentMessage/delta")
    parse_runs, card_runs = [], []
    for _ in range(rounds):  # alternate, so a burst of load on the box hits both paths alike
        parse_runs.append(_json_only(lines))
        card_runs.append(_reduce_and_serialize(messages))
    parse = min(parse_runs)
    card_s = min(seconds for seconds, _ in card_runs)
    result = {
        "messages": len(lines),
        "delta_share": round(deltas / len(lines), 3),
        "serialize_every": SERIALIZE_EVERY,
        "uploads": card_runs[0][1],
        "json_loads_s": round(parse, 4),
        "reduce_and_serialize_s": round(card_s, 4),
        "json_loads_msgs_per_s": round(len(lines) / parse),
        "reduce_msgs_per_s": round(len(lines) / card_s),
        "ratio": round(card_s / parse, 2),
        "serialize_once_us": round(_serialize_cost(messages, serialize_samples) * 1e6, 1),
        "goal_ratio": 3.0,
    }
    return result


def main() -> dict[str, Any]:
    result = run()
    print(f"{result['messages']} messages ({result['delta_share']:.0%} agent-message deltas)")
    print(f"json.loads only:                 {result['json_loads_s']:.3f} s "
          f"({result['json_loads_msgs_per_s']:,} msg/s)")
    print(f"reduce + serialize every {SERIALIZE_EVERY}:    {result['reduce_and_serialize_s']:.3f} s "
          f"({result['reduce_msgs_per_s']:,} msg/s, {result['uploads']} serializations)")
    print(f"ratio: {result['ratio']}x the JSON parse (goal <= {result['goal_ratio']}x)")
    print(f"one serialization mid-stream (to_dict + json.dumps): {result['serialize_once_us']} us")
    return result


if __name__ == "__main__":
    main()
