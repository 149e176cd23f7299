#pragma once
// Bounding a batch of β-CROWN domains (one round's children, FSB's trial children, the root):
// CROWN from the objective's rows with the domains' intermediate bounds (refreshed after the
// batch's earliest split under BabIntermediate::kRefresh), each domain's α and split multipliers
// β optimised together by the shared RelaxationOptimiser (methods/relaxation_optimiser.hpp),
// domains proved during the optimisation leaving it (not with --deterministic), then a last
// pass over every domain that records the A matrices the branching scores and the attack read.
// Under spec-parallel branch and bound the ranks of a group bound their own domains in the same
// passes.
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "distcrown/bab/bab.hpp"
#include "distcrown/bab/objective.hpp"
#include "distcrown/bounds/interval.hpp"
#include "distcrown/collective/communicator.hpp"
#include "distcrown/graph/bound_graph.hpp"
#include "distcrown/methods/options.hpp"
#include "distcrown/methods/pass_context.hpp"
#include "domain.hpp"
#include "methods/planned_beta.hpp"
#include "relu_layout.hpp"

namespace distcrown::bab::detail {

/// A bounded batch of B domains.
struct Bounded {
  at::Tensor values;   // [B]
  at::Tensor lower;    // [B, K]
  at::Tensor input_A;  // [K', B, *input_shape] from the recorded pass, or undefined
  bool recorded = false;
};

class DomainBounder {
 public:
  /// `box` [1, *input_shape] on the graph's device; `share`: the group's ranks that split each
  /// batch (spec-parallel), null when none. The passes stop at `checkpoint`, and the
  /// optimisation of a batch at its deadline. They run planned under PassPath::kPlanned where
  /// the plan applies (a chain of affine nodes and ReLUs on the CPU, not spec-parallel).
  DomainBounder(const BoundGraph& g, const ReluLayout& layout, const Objective& objective,
                const BabOptions& options, const BoundOptions& bound_options, Checkpoint checkpoint,
                InputBox box, collective::CommPtr share);

  /// Bounds `ds` and writes each domain's value (floored at its parent's when `optimise`), α, β,
  /// scores and refreshed bounds. Alone, or under spec-parallel this rank's own domains in the
  /// same passes as its group's other ranks (on the group's largest count, padded with copies of
  /// its last domain or of the spare), each rank's results its own; collective over the group
  /// then. With `values_only` (FSB's trial children, which are never queued) the domains are not
  /// written and no pass is recorded: only the values are returned (unfloored: they rank
  /// candidate splits against each other).
  Bounded bound(std::vector<Domain>& ds, int iterations, bool optimise, bool values_only = false);

  /// Whether the passes run planned (methods/planned_beta.hpp), and their products' FLOPs.
  [[nodiscard]] bool planned() const { return planned_ != nullptr; }
  [[nodiscard]] int64_t pass_flops() const { return planned_ ? planned_->flops() : 0; }

  /// Domains this rank has bounded (padding excluded).
  [[nodiscard]] int64_t bounded() const { return bounded_; }
  void set_bounded(int64_t n) { bounded_ = n; }
  /// Spec-parallel: a domain of the model's shapes that pads a rank's share when it has none.
  void set_spare(const Domain& d) { spare_ = d; }
  [[nodiscard]] const Domain& spare() const { return *spare_; }
  /// Spec-parallel: the group's ranks; null when none.
  [[nodiscard]] const collective::CommPtr& share() const { return share_; }
  /// Spec-parallel: the largest `n` over the group's ranks (every rank calls it in step).
  [[nodiscard]] int64_t group_max(int64_t n) const;
  [[nodiscard]] const InputBox& box() const { return box_; }

 private:
  /// `real`: the first positions that are domains of the search; the rest pad a spec-parallel
  /// share and do not keep the optimisation going.
  Bounded bound_here(std::vector<Domain>& ds, int iterations, bool optimise, bool values_only,
                     std::optional<int64_t> real = std::nullopt);
  /// bound_here through the plan.
  Bounded bound_planned(std::vector<Domain>& ds, int iterations, bool optimise, bool values_only);

  const BoundGraph& g_;
  const ReluLayout& layout_;
  const Objective& obj_;
  const BabOptions& o_;
  BoundOptions bo_;
  PassContext passes_;
  InputBox box_;
  collective::CommPtr share_;
  std::optional<Domain> spare_;
  int64_t bounded_ = 0;
  std::unique_ptr<PlannedBeta> planned_;  // null: CrownEngine's passes
};

}  // namespace distcrown::bab::detail
