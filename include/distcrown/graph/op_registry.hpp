#pragma once
// Operator registry for model import, keyed by ONNX op type (ONNX Runtime style): each operator
// family registers a lowering function that turns one ONNX node into BoundGraph nodes, or folds it
// to a constant when all its inputs are constants. The loader never switches on op types.
// This header has no protobuf dependency: the loader translates attributes into AttributeMap.
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "distcrown/graph/bound_graph.hpp"

namespace distcrown {

/// An ONNX value during import: either a constant tensor or the output of a graph node.
struct Value {
  at::Tensor constant;  // defined iff this is a constant
  int node = -1;        // graph node index iff bounded (depends on the perturbed input)
  [[nodiscard]] bool is_constant() const { return node < 0 && constant.defined(); }
  [[nodiscard]] bool is_bounded() const { return node >= 0; }
  [[nodiscard]] bool is_absent() const { return node < 0 && !constant.defined(); }
  static Value of_constant(at::Tensor t) { return Value{std::move(t), -1}; }
  static Value of_node(int i) { return Value{{}, i}; }
};

struct AttributeMap {
  std::map<std::string, int64_t> ints;
  std::map<std::string, std::vector<int64_t>> int_lists;
  std::map<std::string, double> floats;
  std::map<std::string, std::string> strings;
  std::map<std::string, at::Tensor> tensors;

  [[nodiscard]] bool has(const std::string& key) const;
  [[nodiscard]] int64_t get_int(const std::string& key, int64_t fallback) const;
  [[nodiscard]] std::vector<int64_t> get_ints(const std::string& key,
                                              const std::vector<int64_t>& fallback) const;
  [[nodiscard]] double get_float(const std::string& key, double fallback) const;
  [[nodiscard]] std::string get_string(const std::string& key, const std::string& fallback) const;
};

/// What a lowering function sees of one ONNX node.
struct LoweringContext {
  std::string name;     // node name (or its first output's name when unnamed)
  std::string op_type;  // e.g. "Gemm"
  std::string source;   // "model.onnx"
  std::string where;    // "model.onnx: node 'name' (Gemm)", the prefix of every message
  const AttributeMap& attrs;
  std::vector<Value> inputs;
  GraphBuilder& builder;

  [[noreturn]] void fail(const std::string& what) const;         // ModelError
  [[noreturn]] void unsupported(const std::string& what) const;  // UnsupportedError
  /// Input i, which must be a constant (else a clear error).
  [[nodiscard]] const at::Tensor& constant(size_t i) const;
  /// Input i, which must be the output of a bounded node (else a clear error).
  [[nodiscard]] int bounded(size_t i) const;
  [[nodiscard]] bool has_input(size_t i) const {
    return i < inputs.size() && !inputs[i].is_absent();
  }
  [[nodiscard]] bool all_constant() const;
  /// Adds a node fed by graph nodes, named after this ONNX node.
  Value emit(NodePtr op, std::vector<int> from, const std::string& suffix = "");
};

using LowerFn = std::function<Value(LoweringContext&)>;

class OpRegistry {
 public:
  void add(const std::string& op_type, LowerFn fn);
  [[nodiscard]] const LowerFn* find(const std::string& op_type) const;
  [[nodiscard]] std::vector<std::string> op_types() const;

 private:
  std::map<std::string, LowerFn> table_;
};

/// The registry with every built-in operator (built once, read-only afterwards).
const OpRegistry& builtin_ops();

}  // namespace distcrown
