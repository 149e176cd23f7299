#pragma once
// The nodes a branch and bound on activations splits — ReLUs (at 0), the nodes whose input
// splits at any point (OpTraits::splits_anywhere: Sigmoid, Tanh, GELU, ...) and the operands of
// products (OpTraits::splits_operands: Mul, MatMul; one entry per operand) — and two views of
// their neurons: the bounding passes' (this rank's slice of a tensor-parallel layer's features,
// [..., width]) and the domains' (every neuron, [..., global]: the same on every rank, so that
// the queue, the branching and the exchange between groups are one process's). Without tensor
// parallelism the two are the same tensors.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "distcrown/graph/bound_graph.hpp"

namespace distcrown::bab::detail {

class ReluLayout {
 public:
  /// Every rank of a group constructs it together: the constant terms run forward(), where FSDP
  /// gathers the weights.
  explicit ReluLayout(const BoundGraph& g);

  /// R: the split entries (ReLUs, general nodes, product operands), r = 0..R-1 in graph order
  /// of their nodes (a product's first operand before its second).
  [[nodiscard]] size_t size() const { return relus_.size(); }
  [[nodiscard]] bool empty() const { return relus_.empty(); }
  /// The node of entry r (a product's for its operands).
  [[nodiscard]] int relu(size_t r) const { return relus_[r]; }
  /// Which input of relu(r) entry r splits (0 but for a product's second operand).
  [[nodiscard]] int input(size_t r) const { return input_[r]; }
  /// Whether entry r is an operand of a product (OpTraits::splits_operands): general, and
  /// without α (the product's planes keep CROWN's choice).
  [[nodiscard]] bool operand(size_t r) const { return operand_[r]; }
  /// Whether split node r is a general one (split at any point of its input, no β) rather than
  /// a ReLU (split at 0, with β).
  [[nodiscard]] bool general(size_t r) const { return general_[r]; }
  /// Whether split node r's domains keep optimisable relaxation parameters: every ReLU (its
  /// lower slope, [K, 1, *shape]) and a general node with OpTraits::relaxation_params (its
  /// op's, [K, 1, k, *shape]: initial_relaxation_params' [k, 1, *shape] per row, the batch
  /// moved to dim 1 like a ReLU's).
  [[nodiscard]] bool has_alpha(size_t r) const { return alpha_[r]; }
  /// Whether any split node is a general one.
  [[nodiscard]] bool any_general() const {
    return std::find(general_.begin(), general_.end(), true) != general_.end();
  }
  /// The node feeding entry r, whose bounds a domain keeps and splits.
  [[nodiscard]] int pre(size_t r) const { return pre_[r]; }
  [[nodiscard]] const std::vector<int>& pre_nodes() const { return pre_; }
  /// Inputs of relaxed nodes that are not split (MaxPool, Sigmoid), none of them a ReLU's.
  [[nodiscard]] const std::vector<int>& other_pre() const { return other_pre_; }
  /// Split node -> its entries (a product's one or two operands), every split node / ReLU -> r,
  /// the ReLUs only (those with α and β).
  [[nodiscard]] const std::map<int, std::vector<size_t>>& index() const { return index_; }
  [[nodiscard]] const std::map<int, size_t>& relu_index() const { return relu_index_; }
  /// The entry that splits input `input` of `node`.
  [[nodiscard]] std::optional<size_t> index_of(int node, int input = 0) const;
  /// BaBSR's bias term of ReLU r's input node: an affine node's output on zero inputs (a
  /// Linear's or Conv's bias, BatchNorm's shift), zeros for any other node; [1, N local].
  [[nodiscard]] const at::Tensor& bias(size_t r) const { return bias_[r]; }

  /// ReLU r's neurons as the passes see them: this rank's slice of the last dim.
  [[nodiscard]] at::Tensor local_part(const at::Tensor& t, size_t r) const;
  /// ReLU r's neurons as domains keep them: every rank's slices, gathered.
  [[nodiscard]] at::Tensor whole(const at::Tensor& t, size_t r) const;
  /// whole() of many tensors (each with its ReLU) in one AllGather.
  [[nodiscard]] std::vector<at::Tensor> whole(
      const std::vector<std::pair<at::Tensor, size_t>>& items) const;

 private:
  void add(int node, int input, bool general, bool alpha, bool operand);

  const BoundGraph& g_;
  std::vector<int> relus_, input_, pre_, other_pre_;
  std::vector<bool> general_, alpha_, operand_;
  std::map<int, std::vector<size_t>> index_;
  std::map<int, size_t> relu_index_;
  std::vector<std::optional<OutputShard>> shards_;  // per ReLU: its input's slice under TP
  std::vector<at::Tensor> bias_;
};

}  // namespace distcrown::bab::detail
