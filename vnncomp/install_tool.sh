#!/usr/bin/env bash
# VNN-COMP harness, step 1: `install_tool.sh v1`. Installs what a fresh Debian 12 machine lacks,
# builds (scripts/setup.sh: the README's first command) and decides the embedded default property
# once, so that a broken install fails here rather than on the first instance.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
check_version "$@"
cd "${TOOL_DIR}"
bash scripts/setup.sh
"${DISTCROWN_BIN}" verify
