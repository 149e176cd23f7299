#!/usr/bin/env bash
# verify --device cuda on the ACAS Xu instances (see scripts/gpu_prepare.sh). Output under $OUT.
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
source scripts/gpu_env.sh
nvidia-smi -L
PYTHONUNBUFFERED=1 python3 benchmarks/bench_vnncomp.py --fixtures .gpu/fixtures --benchmark acasxu --csv $OUT/acas_gpu.csv -- --device cuda --bab-batch-size 4096 2>&1 | tee $OUT/acas_gpu.txt
