#!/usr/bin/env bash
# VNN-COMP harness, step 3: `run_instance.sh v1 CATEGORY ONNX VNNLIB RESULT TIMEOUT`. Decides the
# instance within TIMEOUT seconds and writes RESULT in the competition's format (sat with its
# counterexample, unsat, timeout, unknown, or error). DISTCROWN_ARGS adds options to verify
# (e.g. "--threads 8").
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
check_version "$@"
if (($# != 6)); then
  echo "usage: run_instance.sh v1 CATEGORY ONNX VNNLIB RESULT TIMEOUT" >&2
  exit 1
fi
CATEGORY="$2"
RESULT="$5"
TIMEOUT="$6"
echo "Running distcrown on category '${CATEGORY}': onnx '$3', vnnlib '$4', result '${RESULT}'," \
  "timeout ${TIMEOUT} s" >&2
rm -f "${RESULT}"
mkdir -p "${STATE_DIR}"
ONNX="$(plain_file "$3")"
VNNLIB="$(plain_file "$4")"
# shellcheck disable=SC2086  # DISTCROWN_ARGS is a list of options
"${DISTCROWN_BIN}" verify --model "${ONNX}" --vnnlib "${VNNLIB}" --timeout "${TIMEOUT}" \
  --result "${RESULT}" ${DISTCROWN_ARGS:-} &
pid=$!
echo "${pid}" > "${STATE_DIR}/verify.pid"
status=0
wait "${pid}" || status=$?
rm -f "${STATE_DIR}/verify.pid"
# verify writes `error` to RESULT on any failure it can report; a crash leaves none.
[[ -s "${RESULT}" ]] || echo "error" > "${RESULT}"
exit "${status}"
