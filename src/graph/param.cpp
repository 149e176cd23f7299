#include "distcrown/graph/param.hpp"

#include <ATen/ATen.h>

namespace distcrown {

LocalParam::LocalParam(at::Tensor value) : value_(std::move(value)) {}
int64_t LocalParam::resident_bytes() const {
  return static_cast<int64_t>(value_.numel()) * static_cast<int64_t>(value_.element_size());
}
int64_t LocalParam::numel() const { return value_.numel(); }
void LocalParam::to_dtype(at::ScalarType dtype) {
  if (value_.is_floating_point()) value_ = value_.to(dtype).contiguous();
}

void LocalParam::to_device(const at::Device& device) { value_ = value_.to(device); }

ParamPtr make_param(const at::Tensor& value) {
  return std::make_shared<LocalParam>(value.contiguous());
}

}  // namespace distcrown
