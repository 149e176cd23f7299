#!/usr/bin/env bash
# The sanitizer job (a step of scripts/test.sh in both tiers): the parsers, the hostile-input tests
# and the fuzz driver built with AddressSanitizer and UndefinedBehaviorSanitizer into build-asan/
# (a second tree that builds only these targets and the library under them), then run (the fuzz
# driver's regression corpus and 4000 mutations on each of seeds 1-3; ctest's fuzz_inputs entry,
# seed 1's first 1500, is in the full tier). Any sanitizer report fails it.
# With --all (scripts/test.sh --all): every target of the project (library, CLI, all tests, the MPI
# tests) into the same build-asan/, then the whole ctest suite, mpirun tests included.
# Needs scripts/setup.sh to have run (virtual environment, Debian packages).
#   bash scripts/sanitize.sh [fuzz cases per seed, default 4000]
#   bash scripts/sanitize.sh --all [ctest arguments, e.g. -R test_cli]
# DISTCROWN_SANITIZE_BUILD names another build folder than build-asan/.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ALL=0
if [[ "${1:-}" == "--all" ]]; then
  ALL=1
  shift
fi
CASES="${1:-4000}"
PY="$(cat "${ROOT}/.venv-path")/bin/python"
TORCH_PREFIX="$("$PY" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')"
BUILD="${DISTCROWN_SANITIZE_BUILD:-${ROOT}/build-asan}"
FLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
# -O1 -g1 (line tables) rather than RelWithDebInfo's -O2 -g: AddressSanitizer's own advice for
# usable stack traces at reasonable speed, and a third of the compile time on LibTorch's headers
# (ops/relu.cpp: 11 s against 30 s).
OPT_FLAGS="-O1 -g1 -DNDEBUG"
source "${ROOT}/scripts/ccache_env.sh"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" \
  -DDISTCROWN_PYTHON="$PY" -DDISTCROWN_WERROR=ON -DDISTCROWN_BUILD_BENCHMARKS=OFF \
  "${DISTCROWN_CCACHE_ARGS[@]}" "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=${OPT_FLAGS}" \
  "-DCMAKE_C_FLAGS_RELWITHDEBINFO=${OPT_FLAGS}" \
  "-DCMAKE_CXX_FLAGS=${FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined" \
  "-DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=address,undefined" >/dev/null
# The default run checks no leaks; --all does (below). These variables reach every test process:
# ctest's, the CLI runs the tests start, and the ranks mpirun starts on this host (they inherit
# mpirun's environment).
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
if ((ALL)); then
  cmake --build "$BUILD" -j"$(nproc)"
  # AddressSanitizer reports also go to files (one per process), so that a CLI run whose exit code
  # a test does not look at cannot hide one. UndefinedBehaviorSanitizer ignores log_path when it
  # runs inside ASan's runtime (GCC 12); it aborts instead (exit 134, not the 1 that -fno-sanitize-
  # recover gives by default and that the CLI's error tests expect) and prints to stderr.
  REPORTS="${BUILD}/sanitizer-reports"
  rm -rf "$REPORTS" && mkdir -p "$REPORTS"
  # Leaks are checked here (LibTorch's start-up allocations stay reachable, so they are no
  # reports), except in the processes that start Open MPI: tests/CMakeLists.txt turns it off there.
  export ASAN_OPTIONS="${ASAN_OPTIONS}:log_path=${REPORTS}/asan:detect_leaks=1"
  export UBSAN_OPTIONS="${UBSAN_OPTIONS}:abort_on_error=1"
  export DISTCROWN_REQUIRE_FIXTURES="${DISTCROWN_REQUIRE_FIXTURES:-1}"
  rc=0
  ctest --test-dir "$BUILD" --output-on-failure -j"$(nproc)" "$@" || rc=$?
  if [[ -n "$(ls -A "$REPORTS")" ]]; then
    cat "$REPORTS"/*
    echo "sanitize --all: sanitizer reports in ${REPORTS}" >&2
    exit 1
  fi
  ((rc == 0)) || exit "$rc"
  echo "sanitize --all: clean"
  exit 0
fi
targets=(fuzz_inputs test_hostile_inputs test_onnx_loader test_vnnlib test_vnnlib2 test_output_file)
cmake --build "$BUILD" -j"$(nproc)" --target "${targets[@]}"
for t in test_hostile_inputs test_onnx_loader test_vnnlib test_vnnlib2 test_output_file; do
  "$BUILD/bin/$t" --gtest_brief=1
done
for seed in 1 2 3; do
  "$BUILD/bin/fuzz_inputs" --cases "$CASES" --seed "$seed"
done
echo "sanitize: clean"
