# Shared by scripts/test.sh and scripts/up.sh: install what boss-agent needs on a fresh
# Debian machine. Idempotent: each step checks first and does nothing when satisfied.
# shellcheck shell=bash

CODEX_NPM_VERSION="0.171.0"   # the codex CLI the tests and protocol snapshot are pinned to
ESLINT_NPM_PACKAGES="eslint@9.39.5 @eslint/js@9.39.5 globals@17.14.0"  # lints the page's modules; node >= 18.18
_here="${BASH_SOURCE[0]%/*}"; [ "$_here" = "${BASH_SOURCE[0]}" ] && _here=.
ROOT="$(cd "$_here/.." && pwd)"
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

MIN_PYTHON_MINOR=11  # boss-agent needs Python >= 3.11 (pyproject.toml's requires-python)

# python_version PYTHON — print "3.X.Y" and succeed when PYTHON runs at all.
python_version() {
  "$1" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>/dev/null
}

# pyenv_roots — the pyenv roots to look in, one a line: $PYENV_ROOT, `pyenv root`, ~/.pyenv.
pyenv_roots() {
  [ -n "${PYENV_ROOT:-}" ] && echo "$PYENV_ROOT"
  command -v pyenv >/dev/null 2>&1 && pyenv root 2>/dev/null
  [ -n "${HOME:-}" ] && echo "$HOME/.pyenv"
  return 0
}

# find_python [MINOR]: print the first Python >= 3.11 (>= 3.$PYTHON_FLOOR_MINOR when that is
# set; with MINOR: exactly 3.MINOR) found:
# python3.14 ... python3.11 and python3 on PATH, then each pyenv root's versions (also
# `pyenv versions --bare`), then `pyenv prefix`. When there is none, say on stderr where it
# looked and what was too old.
find_python() {
  local exact="${1:-}" floor="${PYTHON_FLOOR_MINOR:-$MIN_PYTHON_MINOR}" candidate path version root name minor
  local looked=() too_old=() candidates=() prefixes=()
  candidates=(python3.14 python3.13 python3.12 python3.11 python3)
  while IFS= read -r root; do
    [ -n "$root" ] || continue
    looked+=("$root/versions")
    for name in "$root"/versions/*; do [ -d "$name" ] && candidates+=("$name/bin/python3"); done
    if command -v pyenv >/dev/null 2>&1; then
      while IFS= read -r name; do
        [ -n "$name" ] && candidates+=("$root/versions/$name/bin/python3")
      done < <(pyenv versions --bare 2>/dev/null)
    fi
  done < <(pyenv_roots)
  if command -v pyenv >/dev/null 2>&1; then
    looked+=("pyenv prefix")
    IFS=: read -ra prefixes <<< "$(pyenv prefix 2>/dev/null)"
    for name in "${prefixes[@]}"; do candidates+=("$name/bin/python3"); done
  else
    looked+=("no pyenv on PATH")
  fi
  for candidate in "${candidates[@]}"; do
    path="$(command -v "$candidate" 2>/dev/null)" || continue
    version="$(python_version "$path")" || continue
    minor="${version#3.}"; minor="${minor%%.*}"
    if [ "${version%%.*}" = 3 ] && [ "$minor" -ge "$floor" ]; then
      [ -z "$exact" ] || [ "$minor" = "$exact" ] && { echo "$path"; return 0; }
      continue
    fi
    too_old+=("$path ($version)")
  done
  local where old=""
  printf -v where '%s, ' "${looked[@]}"
  [ ${#too_old[@]} -gt 0 ] && printf -v old '; too old: %s' "${too_old[*]}"
  local wanted=">= 3.$floor"
  [ -n "$exact" ] && wanted="3.$exact"
  log "no Python $wanted found: looked for python3.$MIN_PYTHON_MINOR..python3.14 and python3" \
      "on PATH (${PATH:-empty}), and in ${where%, }${old}"
  log "install Python 3.$MIN_PYTHON_MINOR or newer (Debian 12: apt install python3 python3-venv;" \
      "or: pyenv install 3.12), then run this again"
  return 1
}

# ensure_venv_python — $VENV exists, made with a Python >= 3.11 (Debian's python3 when none
# is found); with $PYTHON_MINOR set, exactly that 3.x.
ensure_venv_python() {
  local python
  [ -x "$VENV/bin/python" ] && return 0
  python="$(find_python "${PYTHON_MINOR:-}" 2>/dev/null)" || {
    ensure_debian_packages python3:python3 >/dev/null 2>&1 || true
    python="$(find_python "${PYTHON_MINOR:-}")" || return 1
  }
  log "creating ${VENV#"$ROOT"/} with $("$python" --version)"
  "$python" -m venv "$VENV"
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
  local extras="$1" stamp hash target="$ROOT"
  hash="$(sha256sum < "$ROOT/pyproject.toml" | cut -c1-16)"
  stamp="$VENV/.installed-$hash-${extras:-base}"
  [ -n "$extras" ] && target="$ROOT[$extras]"
  installed_with "$hash" "$extras" && return 0
  ensure_venv_python || return 1
  log "installing boss-agent${extras:+[$extras]} into ${VENV#"$ROOT"/}"
  "$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
  if ! "$VENV/bin/python" -m pip install -q -e "$target" >"$VENV/pip.log" 2>&1; then
    grep -v "is ignored" "$VENV/pip.log" >&2; log "pip install failed"; return 1
  fi
  find "$VENV" -maxdepth 1 -name '.installed-*' ! -name ".installed-$hash-*" -delete
  touch "$stamp"
}

# ensure_codex — the pinned codex CLI under .tools/ unless a matching one is on PATH.
ensure_codex() {
  local bin="$TOOLS/node_modules/.bin/codex"
  if [ -x "$bin" ] && "$bin" --version 2>/dev/null | grep -q "$CODEX_NPM_VERSION"; then
    echo "$bin"; return 0
  fi
  ensure_debian_packages node:nodejs npm:npm
  log "installing @openai/codex@$CODEX_NPM_VERSION into .tools/"
  mkdir -p "$TOOLS"
  npm install --prefix "$TOOLS" --no-audit --no-fund --loglevel=error "@openai/codex@$CODEX_NPM_VERSION" >&2
  echo "$bin"
}

# record_codex PATH — tell boss-agent which codex these scripts installed: it is used when
# codex.bin is not set (codex under .tools/ is not on the PATH of a later shell or service).
record_codex() {
  "$VENV/bin/python" -c 'import sys
from boss_agent.codexbin import record_installed_codex
from boss_agent.config import load_config
record_installed_codex(load_config(None).state_dir, sys.argv[1])' "$1"
}

# link_on_path — ~/.local/bin/boss-agent -> .venv/bin/boss-agent, so the README's commands work
# as written; never over a file there that is not a link. Says what it did, and what is missing.
link_on_path() {
  local dir="$HOME/.local/bin" link="$HOME/.local/bin/boss-agent"
  if [ -e "$link" ] && [ ! -L "$link" ]; then
    log "$link is not a link made by this script: left alone (this checkout's is $VENV/bin/boss-agent)"
    return 0
  fi
  mkdir -p "$dir" && ln -sfn "$VENV/bin/boss-agent" "$link"
  case ":$PATH:" in
    *":$dir:"*) log "boss-agent is on your PATH: $link -> $VENV/bin/boss-agent" ;;
    *) log "linked $link -> $VENV/bin/boss-agent, but $dir is not on your PATH:" \
           "add  export PATH=\"\$HOME/.local/bin:\$PATH\"  to your shell's profile" ;;
  esac
}

# ensure_eslint — the pinned ESLint under .tools-js/ (for the page's modules); prints its path.
ensure_eslint() {
  local dir="$ROOT/.tools-js" stamp
  stamp="$dir/.installed-$(echo "$ESLINT_NPM_PACKAGES" | sha256sum | cut -c1-16)"
  if [ ! -f "$stamp" ]; then
    ensure_debian_packages node:nodejs npm:npm
    log "installing $ESLINT_NPM_PACKAGES into .tools-js/"
    mkdir -p "$dir"
    # shellcheck disable=SC2086  # the list is words on purpose
    npm install --prefix "$dir" --no-audit --no-fund --loglevel=error $ESLINT_NPM_PACKAGES >&2
    touch "$stamp"
  fi
  echo "$dir/node_modules/.bin/eslint"
}
