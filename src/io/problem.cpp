#include "distcrown/io/problem.hpp"

#include <ATen/ATen.h>

#include "distcrown/io/onnx_loader.hpp"
#include "distcrown/util/error.hpp"

namespace distcrown::io {

void check_fits(const BoundGraph& graph, const VnnlibProperty& property) {
  if (property.num_inputs != graph.input_numel()) {
    throw ModelError(property.source + " declares " + std::to_string(property.num_inputs) +
                     " inputs X_i but the model's input has " +
                     std::to_string(graph.input_numel()) + " elements");
  }
  if (property.num_outputs != graph.output_numel()) {
    throw ModelError(property.source + " declares " + std::to_string(property.num_outputs) +
                     " outputs Y_j but the model's output has " +
                     std::to_string(graph.output_numel()) + " elements");
  }
  if (property.cases.empty()) throw ParseError(property.source + ": no input box");
}

Problem load_problem(const std::string& model_path, const std::string& vnnlib_path) {
  Problem p{load_onnx(model_path), parse_vnnlib_file(vnnlib_path)};
  check_fits(p.graph, p.property);
  return p;
}

InputBox box_of(const VnnlibCase& c, const BoundGraph& graph, at::ScalarType dtype) {
  const auto n = int64_t(c.input_lower.size());
  at::Tensor lo = at::empty({n}, at::kFloat);
  at::Tensor hi = at::empty({n}, at::kFloat);
  for (int64_t i = 0; i < n; ++i) {
    lo[i] = static_cast<float>(c.input_lower[size_t(i)]);
    hi[i] = static_cast<float>(c.input_upper[size_t(i)]);
  }
  const auto& shape = graph.input_shape();
  return {lo.reshape(shape).to(dtype), hi.reshape(shape).to(dtype)};
}

}  // namespace distcrown::io
