#!/usr/bin/env bash
# Runs the whole test suite: set-up (idempotent; builds into build/), then ctest.
# Tests that need ../shared/fixtures skip with a message where it is absent.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "${ROOT}/scripts/setup.sh"
ctest --test-dir "${ROOT}/build" --output-on-failure -j"$(nproc)" "$@"
