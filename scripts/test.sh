#!/usr/bin/env bash
# Install everything the tests need (Debian packages, Python venv, the pinned codex CLI)
# on a fresh machine, check lint (ruff) and types (mypy --strict, configured in
# pyproject.toml, over boss_agent and tests/support), then run the whole test suite.
# Extra arguments go to pytest.
# BOSS_TEST_SKIP_LINT=1 skips the two checks for a quick focused run (CI never sets it).
set -euo pipefail
source "$(dirname "$0")/setup-common.sh"
cd "$ROOT"

ensure_debian_packages git:git redis-server:redis-server Xvfb:xvfb openbox:openbox \
  xdotool:xdotool xwininfo:x11-utils chromium:chromium chromedriver:chromium-driver \
  node:nodejs npm:npm
ensure_venv test,cua
BOSS_TEST_CODEX_BIN="$(ensure_codex)"
export BOSS_TEST_CODEX_BIN

if [ "${BOSS_TEST_SKIP_LINT:-0}" != 1 ]; then
  log "ruff check"
  "$VENV/bin/ruff" check --quiet boss_agent tests bench
  log "mypy --strict boss_agent"
  "$VENV/bin/mypy"
  log "mypy --strict tests/support"  # the fakes must satisfy the seams they stand in for
  "$VENV/bin/mypy" tests/support
fi

# The tests own their state: no user config, state dir or codex login leaks in.
unset BOSS_AGENT_CONFIG BOSS_SERVER_URL BOSS_STATE_DIR CODEX_HOME
exec "$VENV/bin/python" -m pytest "$@"
