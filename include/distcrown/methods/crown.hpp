#pragma once
// CROWN: backward linear bound propagation with intermediate (pre-activation) bounds computed
// node by node in topological order (scheme in options.hpp). A matrices live only while they are
// propagated: the one for a node is dropped as soon as its inputs' are computed.
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "distcrown/bounds/interval.hpp"
#include "distcrown/collective/autograd.hpp"
#include "distcrown/collective/communicator.hpp"
#include "distcrown/graph/bound_graph.hpp"
#include "distcrown/methods/options.hpp"
#include "distcrown/methods/pass_context.hpp"
#include "distcrown/methods/relaxation_hook.hpp"

namespace distcrown {

/// Which sides of a backward pass are bounded.
struct Sides {
  bool lower = true;
  bool upper = true;
};

class CrownEngine {
 public:
  /// Tensor-parallel graphs (sharding/partitioner.hpp) need every rank to run the same passes;
  /// their pre-activation neurons inside zones are bounded as options.sharded_intermediate says.
  /// With context.spec_comm (spec-parallel bounding), the rows of every backward pass (output
  /// specs and intermediate neurons) are split across its ranks; each rank propagates only its
  /// rows and the bound slices are AllGathered, so every rank ends with all bounds. All ranks must
  /// call the same methods in the same order. context.checkpoint runs between the nodes of every
  /// pass (its optimise_until is α-CROWN's, not read here).
  CrownEngine(const BoundGraph& g, InputBox box, BoundOptions options, PassContext context = {});

  /// Every backward pass asks `hook` (not owned; may be null) for optimisable relaxation
  /// parameters (α-/β-CROWN). Passes with a hook keep autograd history when grad mode is on.
  void set_hook(RelaxationHook* hook) { hook_ = hook; }

  /// Computes every intermediate bound the output's backward pass needs.
  void compute_intermediate_bounds();

  /// Uses given bounds for node i ([batch, *shape]) instead of computing them (branch and bound
  /// reuses a domain's intermediate bounds).
  void set_bounds(int i, Interval b) { bounds_.at(size_t(i)) = std::move(b); }

  /// Known sound bounds of node i ([batch, *shape]) used in place of the IBP step as the
  /// reference of the intermediate-bound scheme (auto_LiRPA's aux_reference_bounds: α-CROWN
  /// passes its best intermediate bounds so far).
  void set_reference_bounds(int i, Interval b) { reference_.at(size_t(i)) = std::move(b); }

  /// Computed intermediate bounds are intersected with the given reference bounds: for
  /// references that are sound bounds of a sub-domain (branch and bound refreshing a domain's
  /// bounds below its splits), so that a refreshed bound is never looser than the one given.
  void intersect_with_references() { intersect_reference_ = true; }

  /// IBP's bounds of C·output from the bounds computed so far (of the output's inputs); what the
  /// tight schemes intersect CROWN's output bounds with. [batch, spec] each.
  [[nodiscard]] Interval output_ibp(const at::Tensor& C) const;

  /// Bounds of C·output, C [spec, n_out] (undefined = identity); lower/upper [batch, spec].
  /// With only one side wanted the other comes back undefined and costs nothing.
  Interval output_bounds(const at::Tensor& C = {}, bool lower = true, bool upper = true);

  /// Interval of node i ([batch, *shape]); only after compute_intermediate_bounds().
  [[nodiscard]] const Interval& bounds(int i) const { return *bounds_.at(size_t(i)); }

  /// Backward pass from `start` with the given A ([spec, batch, *shape of start]), concretized:
  /// lower/upper [batch, spec]. Needs the bounds of every ReLU below start. Local to this rank.
  /// `rows` (LongTensor [spec]) names the start's rows for the relaxation hook (default: 0..).
  Interval backward_from(int start, BoundA a, const at::Tensor& rows = at::Tensor());

  /// Builds the start A for the given row indices (LongTensor [r]): [r, batch, *shape].
  using RowMaker = std::function<at::Tensor(const at::Tensor& idx)>;

  /// Bounds of k rows starting at `start`: chunked by crown_batch_size and, with a spec
  /// communicator, split across ranks. lower/upper [batch, k]. `row_ids` ([k], default 0..k-1)
  /// names the rows for the relaxation hook.
  Interval bound_rows(int start, int64_t k, const RowMaker& make_rows,
                      const at::Tensor& row_ids = at::Tensor(), Sides sides = {});

  /// Rows per pass from `start` for k rows: crown_batch_size, else as BoundOptions::pass_bytes
  /// allows (at least 8), at most k.
  [[nodiscard]] int64_t rows_per_pass(int start, int64_t k) const;

 private:
  /// A step of a backward pass whose A (either layout's) is under autograd registers a hook
  /// that checks the deadline when α/β's backward retraces the step.
  void watch_deadline(const at::Tensor& A) const;
  /// The bounds a step of node `node` reads: each input's, then, for an op that needs them,
  /// each input's forward values at the box centre.
  void step_inputs(const GraphNode& node, std::vector<const Interval*>& in_bounds);
  /// One dense step through node `i`: relaxed through the hook when the node has relaxation
  /// parameters and a hook is set (observed first when `observe`: dense passes are, patches
  /// passes are not, as RelaxationHook::takes_patches() promises), else CROWN's own. `rows`
  /// names the pass's rows for the hook (undefined: 0..r-1).
  std::vector<BoundA> dense_step(int start, int i, const BoundA& here,
                                 std::span<const Interval* const> in_bounds, BiasPair& bias,
                                 const at::Tensor& rows, bool observe);
  /// Row indices live on the device of the bounds (they index device tensors).
  [[nodiscard]] at::TensorOptions index_options() const;
  /// Forward values of every node at the centre of the box, as point intervals, computed on
  /// first use (for nodes with OpTraits::needs_centre_values).
  const std::vector<Interval>& centre_values();
  Interval refine(int i, const Interval& reference);
  /// refine() of a batch's elements one by one: k rows a pass, row j of element b bounding its
  /// j-th unstable neuron (unstable: [B, n] mask, at most k per element). No hook: the rows
  /// name different neurons in different elements.
  Interval refine_each(int i, const Interval& reference, const at::Tensor& unstable, int64_t k);
  /// refine() for a tensor-parallel node (methods/crown_tp.cpp): the rows are chosen over every
  /// rank's neurons, bounded together by all ranks, and each rank keeps its own.
  Interval refine_sharded(int i, const Interval& reference, const OutputShard& shard);
  Interval neuron_rows(int start, const at::Tensor& rows);
  /// Whether neuron rows of `start` are bounded with patches A (methods/crown_patches.cpp): in
  /// patches mode, on a [C, H, W] node that takes them, without a hook or with one that takes
  /// patches (α-CROWN's; β-CROWN's needs dense A for its split multipliers and observations).
  [[nodiscard]] bool uses_patches(int start) const;
  /// neuron_rows() with patches A (this rank's rows), chunked by crown_batch_size, else by
  /// pass_bytes and patches_pass_bytes (the first chunk's A sizes the others).
  Interval patches_rows(int start, const at::Tensor& rows);
  /// backward_from() for a patches A on `start`: patches while the nodes take them, dense after.
  /// `rows` (LongTensor [r]) names the pass's rows for the relaxation hook. `largest_a` (when
  /// given) receives the bytes of the largest A (one side) that a step of the pass received.
  Interval backward_from_patches(int start, PatchesA a, const at::Tensor& rows,
                                 int64_t* largest_a = nullptr);
  Interval chunked(int start, const at::Tensor& idx, const RowMaker& make_rows,
                   const at::Tensor& row_ids, Sides sides);
  /// Bounds this rank's rows (positions idx, LongTensor [r], of the k rows): [batch, r].
  using PartBounder = std::function<Interval(const at::Tensor& idx)>;
  /// bound_rows() with the rank's share bounded by `part` (chunked dense passes, or patches).
  Interval spread_rows(int start, int64_t k, const PartBounder& part, const at::Tensor& row_ids,
                       Sides sides);

  const BoundGraph& g_;
  InputBox box_;
  BoundOptions opt_;
  Checkpoint checkpoint_;
  collective::CommPtr spec_comm_;
  std::vector<std::optional<Interval>> bounds_;
  std::vector<std::optional<Interval>> reference_;
  bool intersect_reference_ = false;
  RelaxationHook* hook_ = nullptr;
  // Spec-parallel passes under a hook gather their rows inside the differentiated computation:
  // their backward collectives must run on every rank in one order (collective/autograd.hpp).
  collective::BackwardOrder backward_order_;
  std::vector<Interval> centre_;  // centre_values(), empty until needed
};

}  // namespace distcrown
