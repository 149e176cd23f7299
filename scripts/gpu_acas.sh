#!/usr/bin/env bash
# verify --device cuda on the ACAS Xu instances (see scripts/gpu_prepare.sh). Output under $OUT.
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
TL=$(python3 -c 'import torch,os;print(os.path.dirname(torch.__file__)+"/lib")')
SP=$(python3 -c 'import torch,os;print(os.path.dirname(os.path.dirname(torch.__file__)))')
export LD_LIBRARY_PATH=$PWD/.gpu/lib:$PWD/build/src:$TL:$(dirname $(find $SP/nvidia -name 'libnccl.so.2' | head -1)):$(dirname $(find $SP/nvidia -name 'libcudart.so.13' | head -1))
nvidia-smi -L
PYTHONUNBUFFERED=1 python3 benchmarks/bench_vnncomp.py --fixtures .gpu/fixtures --benchmark acasxu --csv $OUT/acas_gpu.csv -- --device cuda --bab-batch-size 4096 2>&1 | tee $OUT/acas_gpu.txt
