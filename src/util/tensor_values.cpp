#include "util/tensor_values.hpp"

#include <ATen/ATen.h>

namespace distcrown {

std::vector<double> to_doubles(const at::Tensor& t) {
  const at::Tensor d = t.detach().to(at::kDouble).cpu().contiguous().reshape({-1});
  return {d.data_ptr<double>(), d.data_ptr<double>() + d.numel()};
}

std::string dtype_name(at::ScalarType dtype) {
  if (dtype == at::kFloat) return "float32";
  if (dtype == at::kDouble) return "float64";
  return c10::toString(dtype);
}

}  // namespace distcrown
