#!/usr/bin/env bash
# Install boss-agent and the codex CLI on a fresh machine, then run the main job:
# `boss-agent up` (the local control plane + the daemon, paired). Without arguments and
# without a codex login it runs with --demo (a built-in scripted model, no OpenAI account
# needed); with arguments it passes them to `up` as they are. It links ~/.local/bin/boss-agent
# to the venv's and records the codex it installed, so the README's commands work as written.
# On Linux and macOS it also installs the computer-use driver (the `cua` extra).
#
# `scripts/up.sh --check [UP ARGS]` installs the same way, prints the command it would
# run, then runs `boss-agent doctor` (its desktop line says whether computer use is
# offered) and exits with doctor's status instead of starting anything.
set -euo pipefail
check=0
if [ "${1:-}" = "--check" ]; then check=1; shift; fi
source "$(dirname "$0")/setup-common.sh"
cd "$ROOT"

ensure_debian_packages git:git node:nodejs npm:npm
ensure_venv_python || exit 1  # find_python said what is missing
# Computer use: the `cua` extra brings the CUA desktop driver (Linux and macOS builds).
# Without it boss-agent still runs; `boss-agent doctor` then says computer use is limited.
case "$(uname -s)" in
  Linux|Darwin)
    ensure_venv cua || { log "the computer-use driver (cua extra) did not install; continuing without it"
                         ensure_venv ""; } ;;
  *) ensure_venv "" ;;
esac
CODEX="$(command -v codex || ensure_codex)"
# Recorded, not exported: a later `boss-agent` (or the service) finds it too, and a
# codex.bin in the config still wins.
record_codex "$CODEX"
CODEX="${BOSS_CODEX_BIN:-$CODEX}"

args=("$@")
if [ ${#args[@]} -eq 0 ] && ! "$CODEX" login status >/dev/null 2>&1; then
  log "codex is not logged in: starting with --demo (scripted local model)"
  args=(--demo)
fi
link_on_path
if [ "$check" = 1 ]; then
  printf 'would run: %s up%s\n' "$VENV/bin/boss-agent" "$(printf ' %q' "${args[@]}")"
  exec "$VENV/bin/boss-agent" doctor
fi
exec "$VENV/bin/boss-agent" up "${args[@]}"
