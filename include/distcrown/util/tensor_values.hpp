#pragma once
// Tensor values as plain doubles, for output files, result formats and library structs.
#include <vector>

#include <ATen/core/Tensor.h>

namespace distcrown {

/// Every element of `t` (any dtype, any device), flattened in row-major order, as double.
std::vector<double> to_doubles(const at::Tensor& t);

}  // namespace distcrown
