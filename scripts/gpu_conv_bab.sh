#!/usr/bin/env bash
# One device check (after scripts/gpu_prepare.sh; carry .gpu, build/bin, build/src/libdistcrown.so):
#  1. patches-mode (and dense) CROWN / α-CROWN on the fixture CNN and ResNet on CUDA against the
#     auto_LiRPA references (bench_bounds --device cuda);
#  2. the ResNet-large-shaped net: bounds on CUDA compared with this machine's CPU bounds; α-CROWN
#     spec-parallel at P = 4 on the device machine's 16 CPU cores; verify on CUDA at P = 1 and
#     under FSDP at P = 2 (MPI, host-staged, both ranks on the one GPU);
#  3. branch and bound across ranks on CUDA (bench_bab_parallel: NCCL at P = 1, MPI host-staged at
#     P = 2) at batch 64 and 512;
#  4. when time is left, the ViT's CROWN and α-CROWN on CUDA.
# Step 0 runs test_patches' CUDA case. Each step has its own time limit; the whole stays under
# ~8 minutes. Output under $OUT.
# FROM=N starts at step N (a rerun after a partial one); DEV=cpu is a dry run without a GPU.
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
export PYTHONUNBUFFERED=1
START=$SECONDS
DEV=${DEV:-cuda}
FROM=${FROM:-1}
if [ "$DEV" = cuda ]; then
  source scripts/gpu_env.sh
  nvidia-smi -L
else
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
nproc; which mpirun || echo "no mpirun"
ldd build/bin/distcrown | grep "not found" || echo "all libraries found"
F=.gpu/fixtures; W=/tmp/w; mkdir -p $W
D=build/bin/distcrown
step() { echo; echo "== [$((SECONDS - START)) s] $*"; }
compare() {  # max |Δ| and max relative Δ of two bounds --result JSONs (the first: the CPU's)
  python3 - "$@" <<'PY'
import json, sys
a, b = [json.load(open(p)) for p in sys.argv[1:3]]
d = max(max(abs(x - y) for x, y in zip(a[k], b[k])) for k in ("lower", "upper"))
r = max(max(abs(x - y) / max(1, abs(x)) for x, y in zip(a[k], b[k])) for k in ("lower", "upper"))
print(f"   vs CPU: max |diff| {d:.3g}, max rel {r:.3g}; time CPU {a['time_s']:.2f} s, here {b['time_s']:.2f} s")
PY
}

if ((FROM <= 1)); then
step "0. CUDA bounds against the CPU's (TF32 off)"
timeout 120 build/bin/test_patches --gtest_filter='*Cuda*'
step "1. bench_bounds on CUDA (oval21_base, cifar10_resnet_2b; patches, then dense)"
for mode in patches matrix; do
  for c in oval21 resnet; do
    timeout 150 build/bin/bench_bounds --fixtures $F --only fixtures --case $c --alpha --repeat 3 \
      --device $DEV --conv-mode $mode
  done
done

fi

M=$F/models/resnet_large_shaped.onnx; S=$F/models/resnet_large_shaped_prop.vnnlib
if ((FROM <= 2)); then
step "2a. ResNet-large-shaped net: bounds on CUDA"
for m in crown alpha-crown; do
  timeout 120 $D bounds --model $M --vnnlib $S --method $m --device $DEV --timeout 0 \
    --result $W/rl_$m.json | tail -2
  compare .gpu/ref/$m.json $W/rl_$m.json
done
step "2b. α-CROWN spec-parallel at P = 4 on the CPU (one thread per rank)"
timeout 150 mpirun --oversubscribe -np 4 $D bounds --model $M --vnnlib $S --method alpha-crown \
  --spec-parallel --threads 1 --timeout 0 --result $W/rl_spec4.json | tail -3
compare .gpu/ref/alpha-crown.json $W/rl_spec4.json
step "2c. verify on CUDA, P = 1, then P = 2 --shard fsdp (MPI host-staged)"
timeout 100 $D verify --model $M --vnnlib $S --device $DEV --timeout 90 --report $W/v1.json \
  2>&1 | tail -3
timeout 100 mpirun --oversubscribe -np 2 $D verify --model $M --vnnlib $S --device $DEV \
  --backend mpi --shard fsdp --timeout 90 --report $W/v2.json 2>&1 | tail -3
for r in $W/v1.json $W/v2.json; do [ -f $r ] && cat $r && echo; done
fi

B=(python3 benchmarks/bench_bab_parallel.py --model $F/models/mnist_256x6.onnx
   --spec $F/specs/mnist_prop_2_0.05.vnnlib)
if ((FROM <= 3)); then
step "3a. BaB on CUDA, batch 64, 8 rounds: P = 1 over NCCL"
timeout 90 "${B[@]}" --rounds 8 --batch 64 --layouts 1,1,none -- --device $DEV
step "3b. the same, MPI host-staged"
timeout 150 "${B[@]}" --rounds 8 --batch 64 --layouts 1,1,none 2,2,none 2,1,fsdp,spec \
  -- --device $DEV --backend mpi
step "3c. batch 512, 11 rounds, MPI host-staged"
timeout 150 "${B[@]}" --rounds 11 --batch 512 --layouts 1,1,none 2,2,none 2,1,fsdp,spec \
  -- --device $DEV --backend mpi
step "3d. the memory limit on CUDA: batch 4096 under --memory-limit 100 (MB), then the default"
for lim in 100 0; do
  timeout 90 $D verify --model $F/models/mnist_256x6.onnx --vnnlib $F/specs/mnist_prop_2_0.05.vnnlib \
    --device $DEV --bab-batch-size 4096 --max-rounds 6 --timeout 0 --quiet --memory-limit $lim \
    --report $W/lim$lim.json
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); m=r['memory']; print('limit', \
m['limit_bytes'], 'limited', m['limited'], 'min batch', r['bab_min_batch'], 'tensor peak', \
m['peak_tensor_bytes'], 'domains', r['domains_bounded'], r['result'])" $W/lim$lim.json
done
fi
if ((FROM <= 4 && SECONDS - START < 420)); then
  step "4. the ViT on CUDA: CROWN and α-CROWN against the auto_LiRPA references"
  timeout 90 build/bin/bench_bounds --fixtures $F --only ops --ops-case vit_pgd_2_3_16_4021 \
    --alpha --repeat 1 --device $DEV
fi
step "done"
