# shellcheck shell=bash
# Shared by VNN-COMP's three harness scripts (sourced): the version check, the binary, where the
# state of the last run lives, and .gz inputs (the competition's benchmark repositories ship their
# models and properties gzipped until their setup unpacks them; either works here).
VERSION_STRING=v1
TOOL_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# DISTCROWN_BIN overrides the binary (a build elsewhere, an installed one).
DISTCROWN_BIN="${DISTCROWN_BIN:-${TOOL_DIR}/build/bin/distcrown}"
# The pid of the verify that run_instance.sh started, so that prepare_instance.sh stops a stale
# one of this tool, and only that (never another user's or another test's distcrown).
STATE_DIR="${DISTCROWN_VNNCOMP_STATE:-${TMPDIR:-/tmp}/distcrown-vnncomp-${UID}}"

check_version() {
  if [[ "${1:-}" != "${VERSION_STRING}" ]]; then
    echo "Expected first argument (version string) '${VERSION_STRING}', got '${1:-}'" >&2
    exit 1
  fi
}

# Prints the path to read: FILE itself, or FILE.gz (or FILE ending in .gz) unpacked into the state
# folder. Fails when neither exists.
plain_file() {
  local f="$1"
  if [[ "$f" != *.gz && -f "$f" ]]; then echo "$f"; return; fi
  local gz="$f"
  [[ "$f" == *.gz ]] || gz="$f.gz"
  if [[ ! -f "$gz" ]]; then
    echo "no such file: $f" >&2
    return 1
  fi
  mkdir -p "${STATE_DIR}/inputs"
  local out
  out="${STATE_DIR}/inputs/$(printf '%s' "$(realpath "$gz")" | md5sum | cut -c1-12)-$(basename "${gz%.gz}")"
  [[ -f "$out" ]] || { gzip -dc "$gz" > "$out.tmp" && mv "$out.tmp" "$out"; }
  echo "$out"
}
