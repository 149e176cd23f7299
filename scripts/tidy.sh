#!/usr/bin/env bash
# clang-tidy (checks in .clang-tidy, warnings are errors) over the project's own sources, using
# the compile database of build/ (made by scripts/setup.sh).
#   bash scripts/tidy.sh              every source
#   bash scripts/tidy.sh --changed    the sources changed since the last commit that passed on a
#                                     clean tree, and those that include a changed header
#                                     (scripts/tidy_changed.py); every source without a record
#   bash scripts/tidy.sh FILE...      these files
# A run that checks every file it had to and finds nothing, on a work tree without uncommitted
# changes to tracked files, records HEAD in ${DISTCROWN_CACHE}/tidy-passed (outside the clone,
# beside the virtual environment, so that the next clone of a later commit starts from it).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
CACHE="${DISTCROWN_CACHE:-${HOME}/.cache/distcrown}"
RECORD="${CACHE}/tidy-passed"
# The pinned clang-tidy of the virtual environment (scripts/setup.sh installs it).
VENV="$(cat .venv-path 2>/dev/null || true)"
TIDY="${VENV}/bin/clang-tidy"
if [[ -z "$VENV" || ! -x "$TIDY" ]]; then
  echo "clang-tidy: not found in the virtual environment (${VENV:-none}); run scripts/setup.sh" >&2
  exit 1
fi
mapfile -t all < <(git ls-files 'src/*.cpp' 'tests/*.cpp' 'benchmarks/*.cpp' | grep -v install_consumer)
# A new clang-tidy or new checks invalidate the record.
export DISTCROWN_TIDY_FINGERPRINT
DISTCROWN_TIDY_FINGERPRINT="$( ("$TIDY" --version; cat .clang-tidy) | sha256sum | cut -c1-16)"
mode=all
if [[ "${1:-}" == "--changed" ]]; then
  mode=changed
  # Through a file, so that a failure of the selection fails this script.
  selection="$(mktemp)"
  python3 scripts/tidy_changed.py "$RECORD" build "${all[@]}" >"$selection"
  mapfile -t files <"$selection"
elif (($#)); then
  mode=given
  files=("$@")
else
  files=("${all[@]}")
fi
# Records HEAD as passed, where the work tree has no uncommitted change to a tracked file.
record_pass() {
  if [[ "$mode" != "given" ]] && git diff --quiet HEAD -- && mkdir -p "$CACHE"; then
    echo "$(git rev-parse HEAD) ${DISTCROWN_TIDY_FINGERPRINT}" >"$RECORD"
  fi
}
if ((${#files[@]} == 0)); then
  echo "clang-tidy: no source changed since $(cut -d' ' -f1 "$RECORD") passed"
  record_pass
  exit 0
fi
log="$(mktemp)"
# clang-tidy exits non-zero on findings; the log decides.
printf '%s\n' "${files[@]}" | xargs -P "$(nproc)" -n 1 "$TIDY" -p build --quiet >"$log" 2>&1 || true
grep -v "warnings generated" "$log" || true
if grep -qE "(warning|error):" "$log"; then
  echo "clang-tidy: findings above" >&2
  exit 1
fi
echo "clang-tidy: clean (${#files[@]} of ${#all[@]} files)"
record_pass
