#!/usr/bin/env bash
# Prepares .gpu/ (ignored by git) for running this machine's build on the GPU device machine,
# whose image has CUDA, PyTorch 2.11.0+cu130 and Open MPI but not Debian's libonnx/protobuf/Open
# MPI libraries that build/ links: copies those libraries and the fixtures the checks read.
# Then, through the device tool: carry [".gpu", "build/bin", "build/src/libdistcrown.so"] and run
#   OUT=$OUT bash scripts/gpu_check.sh     # CPU vs CUDA bounds, communicator tests, gpu_tp.sh
#   OUT=$OUT bash scripts/gpu_acas.sh      # verify --device cuda on the ACAS Xu instances
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
F="${ROOT}/../shared/fixtures"
cd "$ROOT"
grep -qx "/.gpu/" .git/info/exclude 2>/dev/null || echo "/.gpu/" >>.git/info/exclude
mkdir -p .gpu/lib .gpu/fixtures/models .gpu/fixtures/specs .gpu/fixtures/expected
for l in libonnx_proto.so.1 libprotobuf.so.32 libmpi.so.40 libopen-rte.so.40 libopen-pal.so.40 \
         libhwloc.so.15 libevent_core-2.1.so.7 libevent_pthreads-2.1.so.7; do
  cp -L "/lib/x86_64-linux-gnu/$l" .gpu/lib/
done
cp "$F"/models/{mnist_256x6,oval21_base,cifar10_resnet_2b}.onnx "$F"/models/acasxu_*.onnx .gpu/fixtures/models/
cp "$F"/specs/{mnist_prop_1_0.05,cifar10_resnet_2b_prop_0_eps_0.008}.vnnlib \
   "$F"/specs/oval21_cifar_base_kw-img2578-eps0.021176470588235297.vnnlib \
   "$F"/specs/acasxu_prop_*.vnnlib .gpu/fixtures/specs/
{ echo "benchmark,model,spec,timeout_s,expected"; grep '^acasxu,' "$F/expected/vnncomp_results.csv"; } \
  >.gpu/fixtures/expected/vnncomp_results.csv
du -sh .gpu
