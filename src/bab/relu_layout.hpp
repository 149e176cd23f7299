#pragma once
// The nodes a ReLU-splitting branch and bound splits, and two views of their neurons: the
// bounding passes' (this rank's slice of a tensor-parallel layer's features, [..., width]) and
// the domains' (every neuron, [..., global]: the same on every rank, so that the queue, the
// branching and the exchange between groups are one process's). Without tensor parallelism the
// two are the same tensors.
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

  /// R: the splittable nodes (ReLU), r = 0..R-1 in graph order.
  [[nodiscard]] size_t size() const { return relus_.size(); }
  [[nodiscard]] bool empty() const { return relus_.empty(); }
  [[nodiscard]] int relu(size_t r) const { return relus_[r]; }
  /// The node feeding ReLU r, whose bounds a domain keeps and splits.
  [[nodiscard]] int pre(size_t r) const { return pre_[r]; }
  [[nodiscard]] const std::vector<int>& pre_nodes() const { return pre_; }
  /// Inputs of relaxed nodes that are not split (MaxPool, Sigmoid), none of them a ReLU's.
  [[nodiscard]] const std::vector<int>& other_pre() const { return other_pre_; }
  /// ReLU node -> r.
  [[nodiscard]] const std::map<int, size_t>& index() const { return index_; }
  [[nodiscard]] std::optional<size_t> index_of(int node) const;
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
  const BoundGraph& g_;
  std::vector<int> relus_, pre_, other_pre_;
  std::map<int, size_t> index_;
  std::vector<std::optional<OutputShard>> shards_;  // per ReLU: its input's slice under TP
  std::vector<at::Tensor> bias_;
};

}  // namespace distcrown::bab::detail
