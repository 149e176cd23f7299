#!/usr/bin/env bash
# The tests, in two tiers (docs/testing.md lists what each holds and when to run it):
#   bash scripts/test.sh          the quick tier: the README's test command and CI's (12 min
#                                 with warm caches on the 2-core machine, 55 min cold)
#   bash scripts/test.sh --all    both tiers: 4-rank layouts, fault tests, the large fixtures,
#                                 the whole suite under ASan/UBSan, clang-tidy on every file,
#                                 install_consumer (before a change to the distributed runtime,
#                                 the sanitizer set-up or the build lands)
# Further arguments go to ctest (e.g. -R test_cli). Each step is timed; the table of steps is
# printed at the end, also when a step fails. Tests that need ../shared/fixtures skip with a
# message where it is absent (DISTCROWN_REQUIRE_FIXTURES=1 makes them fail instead).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${DISTCROWN_CACHE:-${HOME}/.cache/distcrown}"
source "${ROOT}/scripts/steps.sh"
ALL=0
if [[ "${1:-}" == "--all" ]]; then
  ALL=1
  shift
fi

# ctest's cost data (each test's last run time, and which failed) lives outside the clone, so that
# a fresh clone starts the longest tests first and puts the last failures at the front.
run_ctest() {
  local build="${ROOT}/build" kept="${CACHE}/ctest/CTestCostData.txt"
  local here="${build}/Testing/Temporary/CTestCostData.txt"
  mkdir -p "$(dirname "$here")" "$(dirname "$kept")"
  [[ -f "$kept" ]] && cp "$kept" "$here"
  local rc=0
  ctest --test-dir "$build" --output-on-failure -j"$(nproc)" "$@" || rc=$?
  [[ -f "$here" ]] && cp "$here" "$kept"
  return "$rc"
}

step "set-up and build (scripts/setup.sh)" bash "${ROOT}/scripts/setup.sh"
step "layering check (scripts/check_layers.py)" python3 "${ROOT}/scripts/check_layers.py"
step "function and class sizes (scripts/check_sizes.py)" \
  "$(cat "${ROOT}/.venv-path")/bin/python" "${ROOT}/scripts/check_sizes.py"
# The results page and README's table say stale wherever the source changed after a measurement.
step "results page marks (scripts/results_page.py --check --lenient)" \
  python3 "${ROOT}/scripts/results_page.py" --check --lenient
step "every test in one tier (scripts/check_tiers.py)" python3 "${ROOT}/scripts/check_tiers.py" \
  "${ROOT}/build"
if ((ALL)); then
  step "ctest, both tiers" run_ctest "$@"
else
  step "ctest, quick tier" run_ctest -L quick "$@"
fi
step "sanitizers: parsers, hostile inputs, fuzz (scripts/sanitize.sh)" \
  bash "${ROOT}/scripts/sanitize.sh"
if ((ALL)); then
  step "sanitizers: the whole suite (scripts/sanitize.sh --all)" \
    bash "${ROOT}/scripts/sanitize.sh" --all "$@"
  step "clang-tidy, every file (scripts/tidy.sh)" bash "${ROOT}/scripts/tidy.sh"
else
  step "clang-tidy, files changed since it last passed" bash "${ROOT}/scripts/tidy.sh" --changed
fi
