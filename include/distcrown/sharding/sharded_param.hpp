#pragma once
// FSDP parameters. A ShardedParam stores 1/P of a parameter's flat values per rank (padded to a
// multiple of P); get() rebuilds the full tensor with one AllGather straight into a single fresh
// buffer (no autograd record, no extra copy) and the caller frees it by dropping the tensor, right
// after the operator used it. The values are bit-for-bit the original ones, so every bound
// computed through them is bitwise identical to P = 1.
#include <array>
#include <string_view>
#include <utility>

#include "distcrown/collective/communicator.hpp"
#include "distcrown/graph/bound_graph.hpp"
#include "distcrown/graph/param.hpp"

namespace distcrown::sharding {

using collective::CommPtr;

class ShardedParam final : public ParamRef {
 public:
  /// Keeps this rank's shard of `full` (a copy; `full` may be released afterwards).
  ShardedParam(CommPtr comm, const at::Tensor& full);
  [[nodiscard]] at::Tensor get() const override;
  [[nodiscard]] int64_t resident_bytes() const override;
  [[nodiscard]] int64_t numel() const override { return numel_; }
  void to_dtype(at::ScalarType dtype) override;
  void to_device(const at::Device& device) override;

 private:
  CommPtr comm_;
  at::Tensor shard_;  // [ceil(numel / P)], this rank's slice of the flat, zero-padded values
  std::vector<int64_t> shape_;
  int64_t numel_;
};

/// Sharding plans a loaded graph can be rewritten for. kTp and kTpExact rewrite the graph the same
/// way (sharding/partitioner.hpp); they differ in how CROWN bounds neurons inside sharded zones.
enum class ShardPlan { kNone, kFsdp, kTp, kTpExact };

/// Names of the plans (util/enum_names.hpp), as --shard takes them.
constexpr auto enum_table(ShardPlan) {
  using P = std::pair<ShardPlan, std::string_view>;
  return std::array{P{ShardPlan::kNone, "none"}, P{ShardPlan::kFsdp, "fsdp"},
                    P{ShardPlan::kTp, "tp"}, P{ShardPlan::kTpExact, "tp-exact"}};
}

/// True for kTp and kTpExact.
inline bool is_tensor_parallel(ShardPlan plan) {
  return plan == ShardPlan::kTp || plan == ShardPlan::kTpExact;
}

ShardPlan parse_shard_plan(const std::string& name);
std::string to_string(ShardPlan plan);

/// Rewrites every parameter of every node for `plan` (kFsdp: ShardedParam over `comm`; kTp,
/// kTpExact: partition_tensor_parallel).
/// Local-only: no communication happens here.
void shard_graph(BoundGraph& graph, ShardPlan plan, const CommPtr& comm);

/// Largest parameter of the graph in bytes (the most FSDP holds gathered at once).
int64_t largest_param_bytes(const BoundGraph& graph);

}  // namespace distcrown::sharding
