#pragma once
// Tensor values as plain doubles, for output files, result formats and library structs.
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace distcrown {

/// Every element of `t` (any dtype, any device), flattened in row-major order, as double.
std::vector<double> to_doubles(const at::Tensor& t);

/// "float32", "float64" (the names of --dtype), else LibTorch's name of the type.
std::string dtype_name(at::ScalarType dtype);

}  // namespace distcrown
