#!/usr/bin/env bash
# bench_tp on a GPU machine: the wide MLP with P = 1 over NCCL, then P = 1, 2, 4 over MPI with
# CUDA tensors staged through host memory (every rank on the one GPU), and the bound-drift table
# with --device cuda. Writes tables (.txt), CSVs and nvidia-smi's report into the folder $1.
#   bash scripts/gpu_tp.sh OUTDIR          # after scripts/setup.sh built build/ with CUDA present
#   HIDDEN=131072 BATCH=256 bash scripts/gpu_tp.sh OUTDIR
set -euo pipefail
OUT="${1:?usage: scripts/gpu_tp.sh OUTDIR}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${DISTCROWN_BUILD_DIR:-${ROOT}/build}/bin"
HIDDEN="${HIDDEN:-131072}"
BATCH="${BATCH:-256}"
PROCS="${PROCS:-1,2,4}"
mkdir -p "$OUT"
[ -x "$BIN/bench_tp" ] || { echo "gpu_tp: $BIN/bench_tp missing: run scripts/setup.sh" >&2; exit 1; }
nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1 || { echo "gpu_tp: no GPU (nvidia-smi failed)" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
common=(--device cuda --hidden "$HIDDEN" --batch "$BATCH" --workdir "$OUT/work")

echo "[gpu_tp] wide MLP, P = 1 over NCCL" >&2
"$BIN/bench_tp" "${common[@]}" --backend nccl --procs 1 --skip-drift \
  --csv-wide "$OUT/wide_nccl.csv" | tee "$OUT/wide_nccl.txt"

if command -v mpirun >/dev/null; then
  echo "[gpu_tp] wide MLP, P = $PROCS over MPI (host-staged, one GPU)" >&2
  "$BIN/bench_tp" "${common[@]}" --backend mpi --procs "$PROCS" --skip-drift \
    --csv-wide "$OUT/wide_mpi.csv" | tee "$OUT/wide_mpi.txt"
  echo "[gpu_tp] bound drift, P = $PROCS (--device cuda)" >&2
  "$BIN/bench_tp" "${common[@]}" --procs "$PROCS" --skip-wide \
    --csv-drift "$OUT/drift.csv" | tee "$OUT/drift.txt"
else
  echo "[gpu_tp] mpirun not found: P > 1 skipped" >&2
fi
echo "[gpu_tp] results in $OUT" >&2
