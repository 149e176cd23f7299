#pragma once
// ONNX -> BoundGraph, on the real ONNX protobuf (libonnx). Initializers and Constant nodes become
// constants; nodes whose inputs are all constant are folded at load; every other node is lowered
// by the operator registry (graph/op_registry.hpp). GELU as torch.onnx exports it before opset 20
// (Div, Erf, Add, Mul, Mul) is first fused into one Gelu node where it matches exactly
// (src/io/onnx_gelu_fusion.hpp). Every error names the file and, where there is one, the node: a
// missing/truncated/corrupt file, an unsupported op, a shape mismatch.
#include <string>

#include "distcrown/graph/bound_graph.hpp"

namespace distcrown::io {

/// Loads a model with one variable input (batch dim 1; a symbolic first dim is taken as 1) and one
/// output.
BoundGraph load_onnx(const std::string& path);

/// Same, from serialized bytes; `source` names them in messages.
BoundGraph load_onnx_bytes(const std::string& bytes, const std::string& source);

struct OnnxLoadOptions {
  /// A model whose output is a Softmax over [1, m] is loaded without it: the graph's outputs are
  /// its logits (for properties that only compare two outputs, which hold of the logits exactly
  /// when they hold of the softmax: io::compares_outputs_only).
  bool peel_output_softmax = false;
};

/// A loaded graph, and whether its output Softmax was left out (OnnxLoadOptions).
struct LoadedOnnx {
  BoundGraph graph;
  bool output_softmax_peeled = false;
};

/// load_onnx_bytes with options.
LoadedOnnx load_onnx_bytes(const std::string& bytes, const std::string& source,
                           const OnnxLoadOptions& options);

}  // namespace distcrown::io
