#include "io/onnx_build.hpp"

#include <ATen/ATen.h>

#include "distcrown/util/error.hpp"

namespace distcrown::io {

OnnxTensor onnx_tensor(const std::string& name, const at::Tensor& t) {
  OnnxTensor out;
  out.name = name;
  switch (t.scalar_type()) {
    case at::kFloat:
      out.data_type = kOnnxFloat;
      break;
    case at::kDouble:
      out.data_type = kOnnxDouble;
      break;
    case at::kLong:
      out.data_type = kOnnxInt64;
      break;
    case at::kInt:
      out.data_type = kOnnxInt32;
      break;
    default:
      throw InvalidArgument("onnx_tensor: unsupported scalar type");
  }
  out.dims.assign(t.sizes().begin(), t.sizes().end());
  const at::Tensor c = t.contiguous();
  out.bytes.assign(static_cast<const char*>(c.data_ptr()), size_t(c.nbytes()));
  return out;
}

namespace {
OnnxAttribute named(const std::string& name, OnnxAttribute::Kind kind) {
  OnnxAttribute a;
  a.name = name;
  a.kind = kind;
  return a;
}
}  // namespace

OnnxAttribute attr_int(const std::string& name, int64_t v) {
  OnnxAttribute a = named(name, OnnxAttribute::Kind::kInt);
  a.i = v;
  return a;
}

OnnxAttribute attr_ints(const std::string& name, std::vector<int64_t> v) {
  OnnxAttribute a = named(name, OnnxAttribute::Kind::kInts);
  a.ints = std::move(v);
  return a;
}

OnnxAttribute attr_float(const std::string& name, double v) {
  OnnxAttribute a = named(name, OnnxAttribute::Kind::kFloat);
  a.f = v;
  return a;
}

OnnxAttribute attr_string(const std::string& name, std::string v) {
  OnnxAttribute a = named(name, OnnxAttribute::Kind::kString);
  a.s = std::move(v);
  return a;
}

OnnxAttribute attr_tensor(const std::string& name, const at::Tensor& t) {
  OnnxAttribute a = named(name, OnnxAttribute::Kind::kTensor);
  a.t = onnx_tensor("", t);
  return a;
}

}  // namespace distcrown::io
