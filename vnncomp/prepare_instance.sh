#!/usr/bin/env bash
# VNN-COMP harness, step 2: `prepare_instance.sh v1 CATEGORY ONNX VNNLIB`. Stops a verify this
# tool left running, unpacks gzipped inputs, and loads the model and the property once (their
# IBP bounds, a fraction of a second): an instance this tool cannot read fails here, with the
# reason on stderr and a non-zero exit, which the harness takes as "skip".
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
check_version "$@"
if (($# != 4)); then
  echo "usage: prepare_instance.sh v1 CATEGORY ONNX VNNLIB" >&2
  exit 1
fi
CATEGORY="$2"
echo "Preparing distcrown for category '${CATEGORY}': onnx '$3', vnnlib '$4'" >&2
mkdir -p "${STATE_DIR}"
if [[ -f "${STATE_DIR}/verify.pid" ]]; then
  pid="$(cat "${STATE_DIR}/verify.pid")"
  if kill -0 "${pid}" 2>/dev/null && [[ "$(ps -o comm= -p "${pid}")" == distcrown ]]; then
    kill -9 "${pid}" 2>/dev/null || true
  fi
  rm -f "${STATE_DIR}/verify.pid"
fi
ONNX="$(plain_file "$3")"
VNNLIB="$(plain_file "$4")"
"${DISTCROWN_BIN}" bounds --model "${ONNX}" --vnnlib "${VNNLIB}" --method ibp > /dev/null
