#pragma once
// A verification problem: a model and a VNNLIB property over it, checked to fit each other.
#include <string>

#include "distcrown/bounds/interval.hpp"
#include "distcrown/graph/bound_graph.hpp"
#include "distcrown/io/vnnlib.hpp"

namespace distcrown::io {

struct Problem {
  BoundGraph graph;
  VnnlibProperty property;
};

/// Throws ModelError/ParseError when the property's X/Y counts differ from the model's input and
/// output sizes.
void check_fits(const BoundGraph& graph, const VnnlibProperty& property);

Problem load_problem(const std::string& model_path, const std::string& vnnlib_path);

/// Input box of one case, [1, *input_shape], values rounded to float32 first (as VNN-COMP tools
/// read them), then cast to `dtype`.
InputBox box_of(const VnnlibCase& c, const BoundGraph& graph, at::ScalarType dtype);

/// The smallest box of `dtype` values that contains the case's box as written (bounds rounded
/// outward, never to the nearest value inside): what a proof must cover. [1, *input_shape].
InputBox enclosing_box(const VnnlibCase& c, const BoundGraph& graph, at::ScalarType dtype);

}  // namespace distcrown::io
