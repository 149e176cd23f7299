#pragma once
// A verification problem: a model and a VNNLIB property over it, checked to fit each other.
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "distcrown/bounds/interval.hpp"
#include "distcrown/graph/bound_graph.hpp"
#include "distcrown/io/vnnlib.hpp"

namespace distcrown::io {

struct Problem {
  BoundGraph graph;
  VnnlibProperty property;
  /// The graph's outputs are the logits z of the model's final Softmax, which was left out
  /// (OnnxLoadOptions::peel_output_softmax; the property compares outputs only): the model's
  /// outputs are softmax_outputs(z).
  bool output_softmax_peeled = false;
};

/// Whether every output constraint of the property compares two outputs, a·(y_i − y_j) ≤ 0 with
/// a > 0 and not strict (as "(>= Y_0 Y_3)" reads): then it holds of softmax(z) exactly when it
/// holds of z (softmax keeps the order of its inputs), and the softmax can be left out. False for
/// a property over several networks.
bool compares_outputs_only(const VnnlibProperty& property);

/// softmax(z) over the whole flat vector, computed in `dtype` as a model's Softmax is.
std::vector<double> softmax_outputs(const std::vector<double>& z, at::ScalarType dtype);

/// Throws ModelError/ParseError when the property's X/Y counts differ from the model's input and
/// output sizes (InvalidArgument when it needs product_problem first).
void check_fits(const BoundGraph& graph, const VnnlibProperty& property);

/// Whether the property is over several networks or relates inputs (VNN-LIB 2.0), and so must be
/// lowered by product_problem before it fits one graph.
bool needs_product(const VnnlibProperty& property);

/// The property over copies of one model (`equal-to`) and its input relations as one problem
/// (io/product.cpp): `copies` holds one load of the model per declared network, whose nodes
/// move into the product graph. Its input is the declared inputs left free once equalities
/// between inputs are substituted; its output the copies' outputs, flattened, then the other
/// input relations as outputs whose constraints join every disjunct. Throws ParseError for
/// networks that are not copies of the first, ModelError when a network does not fit the model.
Problem product_problem(std::vector<BoundGraph> copies, const VnnlibProperty& property);

/// A counterexample (x, y) of the problem's graph as the declared inputs and outputs.
std::pair<std::vector<double>, std::vector<double>> declared_values(const VnnlibProperty& property,
                                                                    const std::vector<double>& x,
                                                                    const std::vector<double>& y);

/// The problem of `property` over the model `load_model()` gives: loaded once, or once per
/// declared network and made one by product_problem when the property needs it; checked to fit.
Problem problem_of(const std::function<BoundGraph()>& load_model, VnnlibProperty property);

/// problem_of the model file and the property file.
Problem load_problem(const std::string& model_path, const std::string& vnnlib_path);

/// Input box of one case, [1, *input_shape], values rounded to float32 first (as VNN-COMP tools
/// read them), then cast to `dtype`.
InputBox box_of(const VnnlibCase& c, const BoundGraph& graph, at::ScalarType dtype);

/// The smallest box of `dtype` values that contains the case's box as written (bounds rounded
/// outward, never to the nearest value inside): what a proof must cover. [1, *input_shape].
InputBox enclosing_box(const VnnlibCase& c, const BoundGraph& graph, at::ScalarType dtype);

}  // namespace distcrown::io
