# Shared by scripts/test.sh and scripts/up.sh: install what boss-agent needs on a fresh
# Debian machine. Idempotent: each step checks first and does nothing when satisfied.
# shellcheck shell=bash

CODEX_NPM_VERSION="0.171.0"   # the codex CLI the tests and protocol snapshot are pinned to
CODEX_OLDEST_NPM_VERSION="0.150.0"  # the oldest supported codex (boss_agent/codexversion.py); CI runs it too
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
TOOLS="$ROOT/.tools"

log() { printf '[setup] %s\n' "$*" >&2; }

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
    log "need root for: $*"; return 1; fi
}

# ensure_debian_packages CMD:PACKAGE ... — install PACKAGE when CMD is not on PATH.
ensure_debian_packages() {
  local missing=() pair
  for pair in "$@"; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing Debian packages: ${missing[*]}"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# find_python312: print the first Python >= 3.12 found (PATH, then pyenv's versions).
find_python312() {
  local candidate
  for candidate in python3.14 python3.13 python3.12 python3 \
      "$HOME"/.pyenv/versions/3.1[2-9]*/bin/python3 /usr/local/bin/python3.1[2-9] /usr/bin/python3.1[2-9]; do
    [ -n "$candidate" ] || continue
    command -v "$candidate" >/dev/null 2>&1 || [ -x "$candidate" ] || continue
    if "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' 2>/dev/null; then
      command -v "$candidate" 2>/dev/null || echo "$candidate"
      return 0
    fi
  done
  return 1
}

# installed_with HASH EXTRAS — is there a stamp for HASH whose extras include all of EXTRAS?
# (a venv set up by scripts/test.sh with `test,cua` already serves up.sh's `cua`)
installed_with() {
  local hash="$1" want="$2" stamp have extra ok
  for stamp in "$VENV/.installed-$hash-"*; do
    [ -f "$stamp" ] || continue
    have=",${stamp##*/.installed-"$hash"-},"
    ok=1
    for extra in ${want//,/ }; do [[ "$have" == *",$extra,"* ]] || ok=0; done
    [ "$ok" = 1 ] && return 0
  done
  return 1
}

# ensure_venv EXTRAS — a project venv with boss-agent installed (editable) with EXTRAS.
ensure_venv() {
  local extras="$1" stamp python hash target="$ROOT"
  hash="$(sha256sum < "$ROOT/pyproject.toml" | cut -c1-16)"
  stamp="$VENV/.installed-$hash-${extras:-base}"
  [ -n "$extras" ] && target="$ROOT[$extras]"
  installed_with "$hash" "$extras" && return 0
  if [ ! -x "$VENV/bin/python" ]; then
    python="$(find_python312)" || {
      log "no Python >= 3.12 found; trying Debian's python3"
      ensure_debian_packages python3:python3 && python="$(find_python312)" || {
        log "boss-agent needs Python >= 3.12 (install it, e.g. with pyenv)"; return 1; }
    }
    log "creating .venv with $("$python" --version)"
    "$python" -m venv "$VENV"
  fi
  log "installing boss-agent${extras:+[$extras]} into .venv"
  "$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
  if ! "$VENV/bin/python" -m pip install -q -e "$target" >"$VENV/pip.log" 2>&1; then
    grep -v "is ignored" "$VENV/pip.log" >&2; log "pip install failed"; return 1
  fi
  find "$VENV" -maxdepth 1 -name '.installed-*' ! -name ".installed-$hash-*" -delete
  touch "$stamp"
}

# ensure_codex [VERSION DIR] — that codex CLI (default: the pinned one under .tools/),
# installed with npm unless DIR already holds it; prints its path.
ensure_codex() {
  local version="${1:-$CODEX_NPM_VERSION}" dir="${2:-$TOOLS}"
  local bin="$dir/node_modules/.bin/codex"
  if [ -x "$bin" ] && "$bin" --version 2>/dev/null | grep -q "$version"; then
    echo "$bin"; return 0
  fi
  ensure_debian_packages node:nodejs npm:npm
  log "installing @openai/codex@$version into ${dir#"$ROOT"/}/"
  mkdir -p "$dir"
  npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "@openai/codex@$version" >&2
  echo "$bin"
}
