# Third-party dependencies, all from Debian packages except LibTorch (PyPI torch, found through
# torch.utils.cmake_prefix_path, which scripts/setup.sh passes as CMAKE_PREFIX_PATH).

# LibTorch's config looks for CUDA pieces it does not need to compile CPU code against; keep it
# quiet about missing optional parts (cuDNN headers, kineto) and use the toolkit in /usr/local/cuda.
if(NOT DEFINED CUDA_TOOLKIT_ROOT_DIR AND EXISTS /usr/local/cuda)
  set(CUDA_TOOLKIT_ROOT_DIR /usr/local/cuda)
endif()
if(NOT DEFINED CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
endif()
# Without a GPU, Caffe2's config would try to run a CUDA program to detect the architecture; name
# it instead (9.0 = Hopper, the GPU machine this project is checked on).
if(NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST} AND NOT DEFINED TORCH_CUDA_ARCH_LIST)
  set(TORCH_CUDA_ARCH_LIST "9.0")
endif()
set(CMAKE_CUDA_STANDARD 17)
find_package(Torch REQUIRED)
# LibTorch's config finds libtorch.so with find_library, which searches the system's library
# folders before the package's lib/: with Debian's libtorch-dev installed, the build took 1.13's
# libtorch.so with 2.11's headers and every executable aborted at start (c10 DispatchKeySet
# assertion). Refuse that mix at configure time, with the way out.
string(FIND "${TORCH_LIBRARY}" "${TORCH_INSTALL_PREFIX}/" _distcrown_torch_at)
if(NOT _distcrown_torch_at EQUAL 0)
  message(FATAL_ERROR
    "LibTorch's config is in ${TORCH_INSTALL_PREFIX} but its find_library chose "
    "${TORCH_LIBRARY}, another LibTorch (e.g. Debian's libtorch-dev). Remove that one, or "
    "configure with -DTORCH_LIBRARY=${TORCH_INSTALL_PREFIX}/lib/libtorch.so")
endif()
find_package(ONNX REQUIRED CONFIG)
find_package(Protobuf REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
find_package(yaml-cpp CONFIG REQUIRED)  # --config FILE.yaml (the CLI only)
find_package(Threads REQUIRED)

# Warnings for our own targets only.
add_library(distcrown_warnings INTERFACE)
target_compile_options(distcrown_warnings INTERFACE -Wall -Wextra -Wpedantic -Wno-unused-parameter)
if(DISTCROWN_WERROR)
  target_compile_options(distcrown_warnings INTERFACE -Werror)
endif()

# Distributed backends: Open MPI always; NCCL (plus the CUDA runtime) when both are found.
find_package(MPI REQUIRED COMPONENTS CXX)
find_package(CUDAToolkit QUIET)
find_package(NCCL QUIET)
if(CUDAToolkit_FOUND AND NCCL_FOUND)
  set(_distcrown_nccl_default ON)
else()
  set(_distcrown_nccl_default OFF)
endif()
option(DISTCROWN_WITH_NCCL "Build the NCCL communicator (needs NCCL and the CUDA toolkit)"
  ${_distcrown_nccl_default})
if(DISTCROWN_WITH_NCCL)
  if(NOT CUDAToolkit_FOUND OR NOT NCCL_FOUND)
    message(FATAL_ERROR "DISTCROWN_WITH_NCCL=ON but NCCL or the CUDA toolkit was not found")
  endif()
  message(STATUS "distcrown: NCCL ${NCCL_VERSION} backend enabled (${NCCL_LIBRARY})")
else()
  message(STATUS "distcrown: NCCL backend disabled")
endif()
