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
/// A bounded value is batched when its ONNX dim 0 is the batch (the node's shape is the ONNX
/// shape, batch 1 at load), or `unbatched` when its ONNX tensor has no batch dim: a model whose
/// first input dimension is part of the input (nn4sys's pensieve "parallel" models, input
/// [12, 8]), or a Transpose that moved the batch dim away (ml4acopf: [1, n] -> [n, 1]). An
/// unbatched node's shape is [batch, *ONNX shape]. Only lowerings that call
/// LoweringContext::bounded_unbatched() accept one; an unbatched result whose ONNX dim 0 is 1
/// becomes batched again (that dim is the batch).
struct Value {
  at::Tensor constant;  // defined iff this is a constant
  int node = -1;        // graph node index iff bounded (depends on the perturbed input)
  bool unbatched = false;
  [[nodiscard]] bool is_constant() const { return node < 0 && constant.defined(); }
  [[nodiscard]] bool is_bounded() const { return node >= 0; }
  [[nodiscard]] bool is_absent() const { return node < 0 && !constant.defined(); }
  static Value of_constant(at::Tensor t) { return Value{std::move(t), -1}; }
  static Value of_node(int i) { return Value{{}, i}; }
  static Value of_unbatched_node(int i) { return Value{{}, i, true}; }
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
  /// The model's floating-point type (its input's): parameters keep it, so a float64 model is
  /// bounded with its own values under --dtype float64 (float32 ones are cast up exactly).
  at::ScalarType param_dtype = at::kFloat;
  /// How many outputs the ONNX node names (Split has several). A lowering returns the first and
  /// puts outputs 1.. into extra_outputs, in order.
  size_t output_count = 1;
  std::vector<Value> extra_outputs;

  [[noreturn]] void fail(const std::string& what) const;         // ModelError
  [[noreturn]] void unsupported(const std::string& what) const;  // UnsupportedError
  /// UnsupportedError: this operator on an unbatched input.
  [[noreturn]] void unsupported_unbatched() const;
  /// Input i, which must be a constant (else a clear error).
  [[nodiscard]] const at::Tensor& constant(size_t i) const;
  /// Input i, which must be the output of a bounded node (else a clear error) and batched (else
  /// UnsupportedError: the operator on a tensor without a batch dim).
  [[nodiscard]] int bounded(size_t i) const;
  /// Input i, bounded, batched or not (Value::unbatched): for the lowerings that handle both.
  [[nodiscard]] int bounded_unbatched(size_t i);
  /// Set by bounded_unbatched(): the loader refuses a lowering that was given an unbatched input
  /// and never asked for one.
  bool unbatched_accepted = false;
  [[nodiscard]] bool has_input(size_t i) const {
    return i < inputs.size() && !inputs[i].is_absent();
  }
  [[nodiscard]] bool all_constant() const;
  /// A constant as an operator's parameter, in param_dtype.
  [[nodiscard]] ParamPtr param(const at::Tensor& value) const;
  /// Adds a node fed by graph nodes, named after this ONNX node.
  Value emit(NodePtr op, std::vector<int> from, const std::string& suffix = "");
};

using LowerFn = std::function<Value(LoweringContext&)>;

/// The newest ONNX opset (default domain) whose operator semantics this project has checked.
constexpr int kNewestCheckedOpset = 21;

/// ONNX opsets [first, last] for which a lowering implements the operator's semantics (the
/// model's opset_import of the default domain decides which version a node is).
struct OpsetRange {
  int first = 1;
  int last = kNewestCheckedOpset;
  [[nodiscard]] bool contains(int64_t opset) const { return opset >= first && opset <= last; }
  [[nodiscard]] bool overlaps(const OpsetRange& o) const {
    return first <= o.last && o.first <= last;
  }
  [[nodiscard]] std::string str() const;  // "10-21"
};

/// Every opset up to the newest checked one.
constexpr OpsetRange kAllOpsets{};

class OpRegistry {
 public:
  /// Registers the lowering of `op_type` for `opsets`. Throws InvalidArgument when op_type is
  /// already registered for an overlapping range: two families must never claim the same node.
  void add(const std::string& op_type, OpsetRange opsets, LowerFn fn);
  /// The lowering for `op_type` at `opset`; null when none (see describe_missing()).
  [[nodiscard]] const LowerFn* find(const std::string& op_type, int64_t opset) const;
  /// Why find() returned null: "unsupported operator X", or the opset ranges that X has.
  [[nodiscard]] std::string describe_missing(const std::string& op_type, int64_t opset) const;
  [[nodiscard]] std::vector<std::string> op_types() const;

 private:
  struct Entry {
    OpsetRange opsets;
    LowerFn lower;
  };
  std::map<std::string, std::vector<Entry>> table_;
};

}  // namespace distcrown
