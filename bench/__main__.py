"""``python -m bench [--quick] [--only GROUP ...]``: the side-by-side table.

Runs every group of ``bench.suite`` (the full suite takes a few minutes on two
cores; ``--quick`` is a smoke with tiny sample counts that exercises every row),
prints one table and writes ``bench/results.json`` (gitignored) with the rows, the
raw numbers of each group and the machine's load before and after.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

from bench.suite import FULL, GROUPS, QUICK, run_suite

RESULTS = Path(__file__).resolve().parent / "results.json"
COLUMNS = (("row", "row"), ("compares", "what it compares"), ("boss_agent", "boss-agent"),
           ("peer", "peer"), ("ratio", "ratio"), ("goal", "goal"), ("verdict", "verdict"))


def format_table(rows: list[dict[str, Any]]) -> str:
    widths = [max(len(title), *(len(str(r[key])) for r in rows)) for key, title in COLUMNS]
    lines = ["  ".join(title.ljust(w) for (_, title), w in zip(COLUMNS, widths, strict=True)),
             "  ".join("-" * w for w in widths)]
    for row in rows:
        lines.append("  ".join(str(row[key]).ljust(w) for (key, _), w in zip(COLUMNS, widths, strict=True)))
    return "\n".join(line.rstrip() for line in lines)


def _load() -> list[float]:
    return [round(v, 2) for v in os.getloadavg()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a ~20 s smoke: tiny samples, every row")
    parser.add_argument("--only", nargs="+", choices=[g.name for g in GROUPS], help="run these groups")
    parser.add_argument("--output", type=Path, default=RESULTS, help="where to write the JSON results")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR, format="%(levelname)s %(name)s: %(message)s")
    load_before, start = _load(), time.monotonic()
    results = run_suite(QUICK if args.quick else FULL, set(args.only or ()),
                        progress=lambda name: print(f"running {name} ...", file=sys.stderr, flush=True))
    elapsed = time.monotonic() - start
    results.update(quick=args.quick, elapsed_s=round(elapsed, 1),
                   finished_at=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                   machine={"cpus": os.cpu_count(), "loadavg_before": load_before, "loadavg_after": _load()})
    print(format_table(results["rows"]))
    print(f"\n{'quick smoke' if args.quick else 'full suite'} in {elapsed:.0f} s on {os.cpu_count()} CPUs; "
          f"load average before {load_before}, after {results['machine']['loadavg_after']}")
    args.output.write_text(json.dumps(results, indent=2) + "\n")
    print(f"results: {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
