#include "distcrown/io/problem.hpp"

#include <cmath>

#include <ATen/ATen.h>

#include "distcrown/io/onnx_loader.hpp"
#include "distcrown/util/error.hpp"
#include "util/tensor_values.hpp"

namespace distcrown::io {

void check_fits(const BoundGraph& graph, const VnnlibProperty& property) {
  if (needs_product(property)) {
    throw InvalidArgument("internal: " + property.source + " must be lowered by product_problem");
  }
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

Problem problem_of(const std::function<BoundGraph()>& load_model, VnnlibProperty property) {
  Problem p;
  if (needs_product(property)) {
    // One load of the model per declared network: the product graph owns each copy's nodes.
    std::vector<BoundGraph> copies;
    for (size_t k = 0; k < property.networks.size(); ++k) copies.push_back(load_model());
    p = product_problem(std::move(copies), property);
  } else {
    p = {load_model(), std::move(property)};
  }
  check_fits(p.graph, p.property);
  return p;
}

Problem load_problem(const std::string& model_path, const std::string& vnnlib_path) {
  return problem_of([&] { return load_onnx(model_path); }, parse_vnnlib_file(vnnlib_path));
}

bool compares_outputs_only(const VnnlibProperty& property) {
  if (needs_product(property)) return false;
  bool any = false;
  for (const VnnlibCase& c : property.cases) {
    for (const OutputConjunction& d : c.disjuncts) {
      for (const LinearConstraint& row : d.constraints) {
        if (row.strict || row.rhs != 0) return false;
        std::vector<double> nonzero;
        for (const double v : row.coeffs) {
          if (v != 0) nonzero.push_back(v);
        }
        if (nonzero.size() != 2 || nonzero[0] != -nonzero[1]) return false;
        any = true;
      }
    }
  }
  return any;
}

std::vector<double> softmax_outputs(const std::vector<double>& z, at::ScalarType dtype) {
  const at::Tensor y = at::softmax(at::tensor(z, at::kDouble).to(dtype), 0).to(at::kDouble);
  const at::Tensor c = y.contiguous();
  return {c.data_ptr<double>(), c.data_ptr<double>() + c.numel()};
}

namespace {

// A property bound beyond the dtype's range (1e308 in float32) becomes infinite: refuse it.
InputBox finite_box(InputBox box, at::ScalarType dtype) {
  if (!all_finite(box)) {
    throw InvalidArgument("an input bound of the property does not fit " + dtype_name(dtype) +
                          " (|x| too large)");
  }
  return box;
}

}  // namespace

InputBox box_of(const VnnlibCase& c, const BoundGraph& graph, at::ScalarType dtype) {
  // double -> float32 (rounded as VNN-COMP tools read the values) -> dtype.
  const auto& shape = graph.input_shape();
  auto as_tensor = [&](const std::vector<double>& v) {
    return at::tensor(v, at::kDouble).to(at::kFloat).reshape(shape).to(dtype);
  };
  return finite_box({as_tensor(c.input_lower), as_tensor(c.input_upper)}, dtype);
}

InputBox enclosing_box(const VnnlibCase& c, const BoundGraph& graph, at::ScalarType dtype) {
  const auto& shape = graph.input_shape();
  const at::Tensor lo = at::tensor(c.input_lower, at::kDouble);
  const at::Tensor hi = at::tensor(c.input_upper, at::kDouble);
  at::Tensor l = lo.to(dtype);
  at::Tensor u = hi.to(dtype);
  // Where rounding to nearest moved a bound inward, take the neighbouring value outside.
  l = at::where(l.to(at::kDouble) > lo, at::nextafter(l, at::full_like(l, -INFINITY)), l);
  u = at::where(u.to(at::kDouble) < hi, at::nextafter(u, at::full_like(u, INFINITY)), u);
  return finite_box({l.reshape(shape), u.reshape(shape)}, dtype);
}

}  // namespace distcrown::io
