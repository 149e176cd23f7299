#!/usr/bin/env bash
# clang-tidy (checks in .clang-tidy, warnings are errors) over the project's own sources, using
# the compile database of build/ (made by scripts/setup.sh). Usage: bash scripts/tidy.sh [files]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
if (($#)); then
  files=("$@")
else
  mapfile -t files < <(git ls-files 'src/*.cpp' 'tests/*.cpp' 'benchmarks/*.cpp' | grep -v install_consumer)
fi
log="$(mktemp)"
# clang-tidy exits non-zero on findings; the log decides.
printf '%s\n' "${files[@]}" | xargs -P "$(nproc)" -n 1 clang-tidy -p build --quiet >"$log" 2>&1 || true
grep -v "warnings generated" "$log" || true
if grep -qE "(warning|error):" "$log"; then
  echo "clang-tidy: findings above" >&2
  exit 1
fi
echo "clang-tidy: clean (${#files[@]} files)"
