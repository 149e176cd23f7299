#pragma once
// Private to src/collective: the argument checks the Local, MPI and NCCL communicators share (no
// MPI here: the Local backend is part of the core library).
#include <chrono>

#include <ATen/core/Tensor.h>

namespace distcrown::collective::detail {

/// `t` is defined and contiguous.
void check_tensor(const at::Tensor& t, const char* op, const char* name);
/// `in` and `out` are valid tensors with the same dtype and device.
void check_in_out(const at::Tensor& in, const at::Tensor& out, const char* op);
/// big.numel() == size * small.numel() (all_gather: big = out; reduce_scatter: big = in).
void check_numel_ratio(const at::Tensor& big, const char* big_name, const at::Tensor& small,
                       const char* small_name, int size, const char* op);
/// 0 <= root < size.
void check_root(int root, int size, const char* op);

/// Seconds elapsed since `start` on the steady clock.
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace distcrown::collective::detail
