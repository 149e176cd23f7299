#!/usr/bin/env bash
# One device check (see scripts/gpu_prepare.sh): CPU vs CUDA bounds on fixtures, the communicator
# tests, and scripts/gpu_tp.sh when mpirun is there. Output under $OUT.
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
exec > >(tee $OUT/log.txt) 2>&1
set -x
nvidia-smi -L; uname -a; cat /etc/os-release | head -2
source scripts/gpu_env.sh
which mpirun mpiexec orted || true
ldd build/bin/distcrown | grep "not found" || echo "all libraries found"
set +x
F=.gpu/fixtures; W=/tmp/w; mkdir -p $W
run() { local name=$1; shift; /usr/bin/time -f "$name wall %e s" "$@" > $OUT/$name.txt 2>&1; echo "rc=$? $(tail -1 $OUT/$name.txt)"; }
for pair in "mnist_256x6:mnist_prop_1_0.05" "oval21_base:oval21_cifar_base_kw-img2578-eps0.021176470588235297" "cifar10_resnet_2b:cifar10_resnet_2b_prop_0_eps_0.008" "acasxu_1_1:acasxu_prop_1"; do
  m=${pair%%:*}; s=${pair##*:}
  for meth in crown alpha-crown; do
    for dev in cpu cuda; do
      build/bin/distcrown bounds --model $F/models/$m.onnx --vnnlib $F/specs/$s.vnnlib --method $meth --device $dev --result $W/${m}_${meth}_${dev}.json > $W/tmp.txt 2>&1
      echo "$m $meth $dev rc=$? $(grep -E 'time|error' $W/tmp.txt | tail -1)"
    done
    python3 - $W/${m}_${meth}_cpu.json $W/${m}_${meth}_cuda.json <<'PY'
import json,sys
try:
  a,b=[json.load(open(p)) for p in sys.argv[1:3]]
  d=max(max(abs(x-y) for x,y in zip(a[k],b[k])) for k in ('lower','upper'))
  r=max(max(abs(x-y)/max(1,abs(x)) for x,y in zip(a[k],b[k])) for k in ('lower','upper'))
  print(f"   cpu vs cuda: max |diff| {d:.3g}, max rel {r:.3g}; time cpu {a['time_s']:.3f} s cuda {b['time_s']:.3f} s; peak cpu {a['memory']['peak_bytes']/1e6:.1f} MB cuda {b['memory']['peak_bytes']/1e6:.1f} MB")
except Exception as e: print("   compare failed:", e)
PY
  done
done
echo "== test_communicator (NCCL/CUDA cases)"; timeout 120 build/bin/test_communicator 2>&1 | tail -15
echo "== test_distributed P=1"; timeout 120 build/bin/test_distributed 2>&1 | tail -5
if command -v mpirun >/dev/null; then timeout 300 bash scripts/gpu_tp.sh $W/tp; cp $W/tp/*.txt $OUT/ 2>/dev/null; for f in $W/tp/work/*.log; do tail -n 5 "$f"; done; fi
