#!/usr/bin/env bash
# Install everything the tests need (Debian packages, Python venv, the pinned codex CLI)
# on a fresh machine, then run the whole test suite. Extra arguments go to pytest.
set -euo pipefail
source "$(dirname "$0")/setup-common.sh"
cd "$ROOT"

ensure_debian_packages git:git redis-server:redis-server Xvfb:xvfb openbox:openbox \
  xdotool:xdotool xwininfo:x11-utils chromium:chromium chromedriver:chromium-driver \
  node:nodejs npm:npm
ensure_venv test,cua
BOSS_TEST_CODEX_BIN="$(ensure_codex)"
export BOSS_TEST_CODEX_BIN

# The tests own their state: no user config, state dir or codex login leaks in.
unset BOSS_AGENT_CONFIG BOSS_SERVER_URL BOSS_STATE_DIR CODEX_HOME
exec "$VENV/bin/python" -m pytest "$@"
