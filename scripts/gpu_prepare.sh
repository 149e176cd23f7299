#!/usr/bin/env bash
# Prepares .gpu/ (ignored by git) for running this machine's build on the GPU device machine,
# whose image has CUDA, PyTorch 2.11.0+cu130 and Open MPI but not Debian's libonnx/protobuf/Open
# MPI libraries that build/ links: copies those libraries and the fixtures the checks read.
# Then, through the device tool: carry [".gpu", "build/bin", "build/src/libdistcrown.so"] and run
#   OUT=$OUT bash scripts/gpu_check.sh     # CPU vs CUDA bounds, communicator tests, gpu_tp.sh
#   OUT=$OUT bash scripts/gpu_acas.sh      # verify --device cuda on the ACAS Xu instances
#   OUT=$OUT bash scripts/gpu_conv_bab.sh  # patches bounds, the ResNet-large net, BaB across ranks
# It also builds the ResNet-large-shaped net (scripts/make_resnet_large.py) and its CPU bounds,
# one thread, P = 1 (.gpu/ref/{crown,alpha-crown}.json: what the device's runs are compared with).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
F="${ROOT}/../shared/fixtures"
cd "$ROOT"
grep -qx "/.gpu/" .git/info/exclude 2>/dev/null || echo "/.gpu/" >>.git/info/exclude
mkdir -p .gpu/lib .gpu/fixtures/models .gpu/fixtures/specs .gpu/fixtures/expected \
  .gpu/fixtures/refs .gpu/ref
for l in libonnx_proto.so.1 libprotobuf.so.32 libmpi.so.40 libopen-rte.so.40 libopen-pal.so.40 \
         libhwloc.so.15 libevent_core-2.1.so.7 libevent_pthreads-2.1.so.7 libyaml-cpp.so.0.7; do
  cp -L "/lib/x86_64-linux-gnu/$l" .gpu/lib/
done
cp -L build/src/libdistcrown_mpi.so .gpu/lib/  # not carried with build/bin
cp "$F"/models/{mnist_256x6,oval21_base,cifar10_resnet_2b}.onnx "$F"/models/acasxu_*.onnx .gpu/fixtures/models/
cp "$F"/refs/{oval21_base,cifar10_resnet_2b}_*.json .gpu/fixtures/refs/
mkdir -p .gpu/fixtures/refs/ops && cp "$F"/refs/ops/vit_pgd_2_3_16_4021.json .gpu/fixtures/refs/ops/
cp "$F"/models/vit_pgd_2_3_16.onnx .gpu/fixtures/models/
cp "$F"/specs/{mnist_prop_1_0.05,mnist_prop_2_0.05,cifar10_resnet_2b_prop_0_eps_0.008}.vnnlib \
   "$F"/specs/oval21_cifar_base_kw-img2578-eps0.021176470588235297.vnnlib \
   "$F"/specs/acasxu_prop_*.vnnlib .gpu/fixtures/specs/
{ echo "benchmark,model,spec,timeout_s,expected"; grep '^acasxu,' "$F/expected/vnncomp_results.csv"; } \
  >.gpu/fixtures/expected/vnncomp_results.csv
M=.gpu/fixtures/models/resnet_large_shaped.onnx
S=.gpu/fixtures/models/resnet_large_shaped_prop.vnnlib
[ -f "$M" ] || "$(cat .venv-path)"/bin/python scripts/make_resnet_large.py --out-dir .gpu/fixtures/models
for m in crown alpha-crown; do
  [ -f ".gpu/ref/$m.json" ] || build/bin/distcrown bounds --model "$M" --vnnlib "$S" --method "$m" \
    --threads 1 --timeout 0 --result ".gpu/ref/$m.json"
done
du -sh .gpu
