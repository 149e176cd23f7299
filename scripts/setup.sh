#!/usr/bin/env bash
# distcrown set-up: installs what a fresh Debian 12 machine lacks, then configures and builds.
#   bash scripts/setup.sh            # deps + configure + build (Release) into build/
#   DISTCROWN_SKIP_BUILD=1 bash scripts/setup.sh   # deps only
# Idempotent: a second run finds everything present and does no network work.
# LibTorch comes from PyPI's torch==2.11.0 in a virtual environment kept outside the clone
# (keyed by the pinned versions) so CI clones reuse it; override with DISTCROWN_VENV.
# The compiler cache (ccache, scripts/ccache_env.sh) lives beside it, for the same reason.
set -euo pipefail

TORCH_VERSION=2.11.0
# clang-tidy from PyPI (a static build of LLVM's): 2.8 times as fast as Debian 12's clang-tidy 14
# on this project's sources, which CI checks on every file when it has no record
# (scripts/tidy.sh). Pinned: a new clang-tidy brings new findings.
CLANG_TIDY_VERSION=22.1.8
# lizard measures functions for scripts/check_sizes.py.
LIZARD_VERSION=1.24.3
PY_PACKAGES=("torch==${TORCH_VERSION}" "numpy" "scikit-learn" "onnx" "matplotlib"
  "clang-tidy==${CLANG_TIDY_VERSION}" "lizard==${LIZARD_VERSION}")
APT_PACKAGES=(libonnx-dev libprotobuf-dev protobuf-compiler libopenmpi-dev openmpi-bin
  nlohmann-json3-dev libcli11-dev libyaml-cpp-dev libgtest-dev libgmock-dev libbenchmark-dev cmake g++ python3-venv
  ccache)

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${DISTCROWN_VENV:-${HOME}/.cache/distcrown/venv-torch-${TORCH_VERSION}}"
BUILD_DIR="${DISTCROWN_BUILD_DIR:-${ROOT}/build}"
# The compiler cache lives beside the virtual environment, outside the clone, so that every clone
# (CI's included) and every build tree (build/, build-asan/) shares it. scripts/ccache_env.sh is
# the one place that names it.
source "${ROOT}/scripts/ccache_env.sh"

step() { echo "[setup] $*" >&2; }
fail() { echo "[setup] FAILED at step: $*" >&2; exit 1; }

# 1. Debian packages: only when one is missing (dpkg-query is local, no network).
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  step "installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -q || fail "apt-get update"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}" || fail "apt-get install ${missing[*]}"
else
  step "Debian packages present"
fi

# 2. Python virtual environment with LibTorch (PyPI torch) and the model-building tools.
PY="${VENV}/bin/python"
if [ ! -x "$PY" ]; then
  step "creating virtual environment ${VENV}"
  mkdir -p "$(dirname "$VENV")"
  python3 -m venv "$VENV" || fail "python3 -m venv ${VENV}"
fi
if ! "$PY" - "${TORCH_VERSION}" "${CLANG_TIDY_VERSION}" "${LIZARD_VERSION}" <<'PYCHECK' 2>/dev/null; then
import sys, importlib.metadata as md
assert md.version("torch").split("+")[0] == sys.argv[1]
assert md.version("clang-tidy") == sys.argv[2]
assert md.version("lizard") == sys.argv[3]
for p in ("numpy", "scikit-learn", "onnx", "matplotlib"):
    md.version(p)
PYCHECK
  step "installing Python packages: ${PY_PACKAGES[*]} (several GB the first time)"
  "$PY" -m pip install -q --upgrade pip || fail "pip upgrade"
  "$PY" -m pip install -q "${PY_PACKAGES[@]}" || fail "pip install ${PY_PACKAGES[*]}"
else
  step "Python packages present in ${VENV}"
fi
TORCH_PREFIX="$("$PY" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')" || fail "locating torch cmake prefix"
echo "$VENV" >"${ROOT}/.venv-path"

# 3. Configure and build.
if [ "${DISTCROWN_SKIP_BUILD:-0}" != "1" ]; then
  step "configuring ${BUILD_DIR}"
  cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE="${CMAKE_BUILD_TYPE:-Release}" \
    -DCMAKE_PREFIX_PATH="${TORCH_PREFIX}" -DDISTCROWN_PYTHON="${PY}" \
    -DDISTCROWN_WERROR="${DISTCROWN_WERROR:-ON}" "${DISTCROWN_CCACHE_ARGS[@]}" || fail "cmake configure"
  step "building"
  cmake --build "$BUILD_DIR" -j"$(nproc)" || fail "cmake build"
fi
step "done"
