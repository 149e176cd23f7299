#pragma once
// Factories for the plain ONNX structs (io/onnx_model.hpp) from LibTorch values: used by the
// synthetic models (io/synthetic.hpp) and by tests that write ONNX files.
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "io/onnx_model.hpp"

namespace distcrown::io {

/// An ONNX tensor holding `t`'s values (float32, float64, int64 or int32), row-major.
/// Throws distcrown::InvalidArgument for other dtypes.
OnnxTensor onnx_tensor(const std::string& name, const at::Tensor& t);

OnnxAttribute attr_int(const std::string& name, int64_t v);
OnnxAttribute attr_ints(const std::string& name, std::vector<int64_t> v);
OnnxAttribute attr_float(const std::string& name, double v);
OnnxAttribute attr_string(const std::string& name, std::string v);
OnnxAttribute attr_tensor(const std::string& name, const at::Tensor& t);

}  // namespace distcrown::io
