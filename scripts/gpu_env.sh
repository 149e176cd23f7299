# Sourced by the device-machine scripts (scripts/gpu_*.sh, see scripts/gpu_prepare.sh): puts the
# carried Debian libraries, build/src, and that machine's python3 torch, NCCL and CUDA runtime
# libraries on LD_LIBRARY_PATH, so that the binaries built here run there.
TL=$(python3 -c 'import torch,os;print(os.path.dirname(torch.__file__)+"/lib")')
SP=$(python3 -c 'import torch,os;print(os.path.dirname(os.path.dirname(torch.__file__)))')
NCCL=$(dirname "$(find "$SP/nvidia" -name 'libnccl.so.2' | head -1)")
CRT=$(dirname "$(find "$SP/nvidia" -name 'libcudart.so.13' | head -1)")
export LD_LIBRARY_PATH=$PWD/.gpu/lib:$PWD/build/src:$TL:$NCCL:$CRT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
