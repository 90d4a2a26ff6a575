#!/usr/bin/env bash
# The real-codex tests on the oldest supported codex (CODEX_OLDEST_NPM_VERSION in
# setup-common.sh), installed beside the pinned one in .tools-oldest/. CI runs this after
# scripts/test.sh; lint and types were checked there. Extra arguments go to pytest.
set -euo pipefail
source "$(dirname "$0")/setup-common.sh"
cd "$ROOT"

BOSS_TEST_CODEX_BIN="$(ensure_codex "$CODEX_OLDEST_NPM_VERSION" "$ROOT/.tools-oldest")"
export BOSS_TEST_CODEX_BIN BOSS_TEST_SKIP_LINT=1
# Not run here: tests/peers/desktop/test_computer_use_choice.py: on 0.150 the first model
# request of a computer-use turn offers none of the MCP servers' tools, which that file
# reads to tell the ways apart (docs/codex-versions.md, "Not yet qualified"); and the bench
# smoke, which measures the pinned codex against its peers (bench/, not a behaviour test).
exec bash scripts/test.sh -m codex --ignore=tests/peers/desktop/test_computer_use_choice.py \
  --ignore=tests/e2e/test_bench_smoke.py "$@"
