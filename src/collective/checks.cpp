#include "checks.hpp"

#include <string>

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include "distcrown/util/error.hpp"

namespace distcrown::collective::detail {

void check_tensor(const at::Tensor& t, const char* op, const char* name) {
  if (!t.defined()) {
    throw InvalidArgument(std::string(op) + ": `" + name + "` is an undefined tensor");
  }
  if (!t.is_contiguous()) {
    throw InvalidArgument(std::string(op) + ": `" + name +
                          "` must be contiguous (call .contiguous())");
  }
}

void check_in_out(const at::Tensor& in, const at::Tensor& out, const char* op) {
  check_tensor(in, op, "in");
  check_tensor(out, op, "out");
  if (in.scalar_type() != out.scalar_type()) {
    throw InvalidArgument(std::string(op) + ": `in` and `out` must have the same dtype (got " +
                          c10::toString(in.scalar_type()) + " and " +
                          c10::toString(out.scalar_type()) + ")");
  }
  if (in.device() != out.device()) {
    throw InvalidArgument(std::string(op) + ": `in` and `out` must be on the same device (got " +
                          in.device().str() + " and " + out.device().str() + ")");
  }
}

void check_numel_ratio(const at::Tensor& big, const char* big_name, const at::Tensor& small,
                       const char* small_name, int size, const char* op) {
  if (big.numel() != static_cast<int64_t>(size) * small.numel()) {
    throw InvalidArgument(std::string(op) + ": " + big_name + ".numel() (" +
                          std::to_string(big.numel()) + ") must equal size() (" +
                          std::to_string(size) + ") * " + small_name + ".numel() (" +
                          std::to_string(small.numel()) + ")");
  }
}

void check_root(int root, int size, const char* op) {
  if (root < 0 || root >= size) {
    throw InvalidArgument(std::string(op) + ": root " + std::to_string(root) +
                          " is not a rank of this communicator (size " + std::to_string(size) +
                          ")");
  }
}

}  // namespace distcrown::collective::detail
