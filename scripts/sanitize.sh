#!/usr/bin/env bash
# The sanitizer job (run by .ci/run after the test suite): the parsers, the hostile-input tests and
# the fuzz driver built with AddressSanitizer and UndefinedBehaviorSanitizer into build-asan/, then
# run (the fuzz driver on more cases and seeds than ctest's). Any sanitizer report fails it.
# Needs scripts/setup.sh to have run (virtual environment, Debian packages).
#   bash scripts/sanitize.sh [fuzz cases per seed, default 4000]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CASES="${1:-4000}"
PY="$(cat "${ROOT}/.venv-path")/bin/python"
TORCH_PREFIX="$("$PY" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')"
BUILD="${ROOT}/build-asan"
FLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" \
  -DDISTCROWN_PYTHON="$PY" -DDISTCROWN_WERROR=ON -DDISTCROWN_BUILD_BENCHMARKS=OFF \
  "-DCMAKE_CXX_FLAGS=${FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined" \
  "-DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=address,undefined" >/dev/null
targets=(fuzz_inputs test_hostile_inputs test_onnx_loader test_vnnlib test_output_file)
cmake --build "$BUILD" -j"$(nproc)" --target "${targets[@]}"
# LibTorch's own start-up allocations are never freed: leak checking would report them, not us.
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
for t in test_hostile_inputs test_onnx_loader test_vnnlib test_output_file; do
  "$BUILD/bin/$t" --gtest_brief=1
done
for seed in 1 2 3; do
  "$BUILD/bin/fuzz_inputs" --cases "$CASES" --seed "$seed"
done
echo "sanitize: clean"
