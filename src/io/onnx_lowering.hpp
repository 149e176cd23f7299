#pragma once
// The loader's lowering of ONNX nodes, shared by the graph build (onnx_loader.cpp) and the
// evaluation of a model at points (point_model.cpp): tensors and attributes out of the parsed
// protobuf, and one node lowered by the operator registry into a map of named values.
#include <map>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "graph/op_registry.hpp"
#include "io/onnx_model.hpp"

namespace distcrown::io {

/// Product of `dims`, refusing negative dimensions (ModelError) and more than 2^31 elements
/// (UnsupportedError).
int64_t checked_numel(const std::vector<int64_t>& dims, const std::string& where);

/// An ONNX tensor (float, double, int32, int64) as an at::Tensor.
at::Tensor to_tensor(const OnnxTensor& t, const std::string& where);

/// The node's name, or its first output's when unnamed.
std::string node_label(const OnnxNode& node);

/// "<source>: node 'name' (Op)", the prefix of every message about the node.
std::string node_where(const std::string& source, const OnnxNode& node);

/// The registry's lowering of `node` (its domain the default one, its op type registered at its
/// opset, else the model's `opset`); UnsupportedError naming the node otherwise.
const LowerFn& find_lowering(const OnnxNode& node, int64_t opset, const std::string& source);

/// Lowers nodes one at a time into `values` (by value name): each reads its inputs there and
/// writes its outputs there, adding nodes to `builder`.
class NodeLowerer {
 public:
  NodeLowerer(std::string source, at::ScalarType dtype, GraphBuilder& builder,
              std::map<std::string, Value>& values)
      : source_(std::move(source)), dtype_(dtype), builder_(builder), values_(values) {}

  /// Lowers `node` by `lower`. UnsupportedError where the lowering cannot; ModelError for a
  /// malformed node.
  void lower(const OnnxNode& node, const LowerFn& lower);

 private:
  std::string source_;
  at::ScalarType dtype_;
  GraphBuilder& builder_;
  std::map<std::string, Value>& values_;
  // Outputs after the first that no lowering produces (MaxPool's Indices, Dropout's mask): a use
  // of one is refused, naming the node that would have produced it.
  std::map<std::string, std::string> not_produced_;  // value name -> which output of which node
};

/// The model's one variable input (a graph input that is not an initializer, `values` holding
/// those); UnsupportedError for several, ModelError for none, and UnsupportedError unless the
/// model has exactly one output.
const OnnxValueInfo& variable_input(const OnnxModel& model,
                                    const std::map<std::string, Value>& values,
                                    const std::string& source);

/// The model's initializers as constants, by name.
std::map<std::string, Value> initializer_values(const OnnxModel& model, const std::string& source);

}  // namespace distcrown::io
