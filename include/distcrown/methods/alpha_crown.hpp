#pragma once
// α-CROWN (Xu et al. 2021), with auto_LiRPA's semantics (../shared/fixtures/README.md): the
// relaxation parameters α of every node that has them (a ReLU's lower slopes, an S-shaped
// function's tangent points) are variables, one tensor per (start node, node) shaped
// [2, rows(start), *P] (index 0 used by lA, 1 by uA; rows = neurons of an intermediate start, spec
// rows of the output; P = [batch, *shape] or [k, batch, *shape]), initialised to CROWN's choice and
// optimised by Adam, projected before each use onto the sound set (BoundNode::
// project_relaxation_params: [0, 1] for slopes), gradients by autograd through the whole backward
// computation.
// Upper and lower output bounds are optimised separately (upper first); every iteration recomputes
// the intermediate bounds with the current α: CROWN rows for the neurons unstable under the
// reference, the reference's bounds for the others. The reference is auto_LiRPA's
// (aux_reference_bounds = best_intermediate_bounds): IBP on the first iteration of the first side,
// then the best intermediate bounds saved at iteration 0 and at the iterations after
// `save_reference_after` that improve the summed bound — and the lower side starts from the upper
// side's, so a two-sided run's lower bounds can differ from a lower-only run's. Every iteration's
// bounds are sound, so the result is the elementwise best over the iterations — never looser than
// CROWN (iteration 0 is CROWN).
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "distcrown/bounds/interval.hpp"
#include "distcrown/collective/communicator.hpp"
#include "distcrown/graph/bound_graph.hpp"
#include "distcrown/methods/options.hpp"
#include "distcrown/methods/pass_context.hpp"
#include "distcrown/methods/relaxation_hook.hpp"

namespace distcrown {

/// Which output bounds α-CROWN optimises (each side from fresh α; upper first when both).
enum class BoundSides { kLower, kUpper, kBoth };

struct AlphaOptions {
  /// The passes' options (intermediate scheme, chunking, conv mode).
  BoundOptions bound;
  BoundSides sides = BoundSides::kBoth;
  int iterations = 20;
  double lr = 0.5;
  double lr_decay = 0.98;
  /// Stop after more than this many iterations without improvement of the summed bound.
  int early_stop_patience = 10;
  /// Iterations after this one save their intermediate bounds as the next reference (when they
  /// improve the summed bound); -1: iterations / 2 (auto_LiRPA's start_save_best 0.5). Fixing it
  /// makes a run with fewer iterations follow a prefix of a longer run's path.
  int save_reference_after = -1;
  /// The lower side stops once this returns true for its bounds so far ([batch, spec]): the
  /// caller's goal is met (auto_LiRPA's stop_criterion_func; verify: every disjunct proved).
  /// CROWN's bounds are tried first: when they meet it, no α is optimised (iterations_run 0).
  std::function<bool(const at::Tensor&)> proved;

  /// A copy with other pass options, or other sides.
  [[nodiscard]] AlphaOptions with_bound(const BoundOptions& b) const {
    AlphaOptions o = *this;
    o.bound = b;
    return o;
  }
  [[nodiscard]] AlphaOptions sided(BoundSides s) const {
    AlphaOptions o = *this;
    o.sides = s;
    return o;
  }
};

/// The α tensors, created on first use from the node's CROWN slopes.
class AlphaSlopes final : public RelaxationHook {
 public:
  /// `output_rows`: spec rows of passes that start at the graph's output. Under spec-parallel
  /// bounding (`size` > 1) this rank stores only the α rows of the row ids it owns
  /// (owned_rows(n, size, rank) of every start's n rows): α memory per rank ÷ P.
  AlphaSlopes(const BoundGraph& g, int64_t output_rows, int rank = 0, int size = 1)
      : g_(g), output_rows_(output_rows), rank_(rank), size_(size) {}

  RelaxParams params(int start, int node, const at::Tensor& rows,
                     std::span<const Interval* const> in) override;
  /// Patches passes (ConvMode::kPatches) read each row's α at its window, without selecting the
  /// rows' whole [C, H, W] slopes first.
  [[nodiscard]] bool takes_patches() const override { return true; }
  RelaxParams window_params(int start, int node, const at::Tensor& rows,
                            std::span<const Interval* const> in, const PatchesA& a) override;

  /// With `options`, a ReLU's α also holds only the positions of its input unstable under
  /// these bounds in some batch element (auto_LiRPA's sparse_features_alpha: at most
  /// minimum_sparsity of the positions): [2, rows, B, U]. α cannot move a stable neuron's line,
  /// and a position stable here that a later pass finds unstable reads its initial slope (any
  /// slope in [0, 1] is sound); α, Adam's moments and the gradient shrink to U of the positions.
  ///
  /// Initialises α from CROWN's slopes on these bounds (indexed by node) instead of the bounds a
  /// node's input has when its α is first used (auto_LiRPA initialises each side's α from a
  /// plain CROWN pass, while our lower side's first pass already uses the upper side's
  /// reference); a convolutional start node with more than 512 neurons unstable under them gets
  /// one α per channel, shared over its positions, as in auto_LiRPA.
  ///
  /// With `options` (the passes' own), an intermediate start whose passes will bound only the
  /// neurons unstable under these bounds (auto_LiRPA's sparse intermediate bounds: not the tight
  /// scheme, a start feeding a splittable node, at most minimum_sparsity of its neurons) gets α
  /// rows for those neurons alone, as auto_LiRPA's sparse α: a 32×32 convolution with a few
  /// hundred unstable neurons holds hundreds of rows, not 32,768. Another row a pass asks for
  /// (only while the reference is still looser than these bounds) gets the fixed initial slopes.
  void initialise_from(std::vector<std::optional<Interval>> bounds,
                       std::optional<BoundOptions> options = std::nullopt) {
    init_ = std::move(bounds);
    sparse_ = options;
  }

  /// Keeps the tensors of the passes under `limit_bytes` (0: no limit): an intermediate start
  /// whose first pass begins with more than half of the limit live (counting Adam's moments of
  /// the α so far) is not optimised, in this and every later pass (optimises() false: CROWN's
  /// bounds for it, computed without autograd, so its pass adds nothing to the graph the
  /// gradient goes through). Starts come in graph order, so the first ones are optimised; the
  /// output's α always is.
  /// `in_step`: the ranks whose passes run in step with this one's (null: this rank alone);
  /// each decision is taken on the most any of them holds (one host-side all-gather).
  void keep_under(int64_t limit_bytes, collective::CommPtr in_step = {}) {
    limit_bytes_ = limit_bytes;
    in_step_ = std::move(in_step);
  }
  [[nodiscard]] bool optimises(int start) override;
  /// How many intermediate starts were left out by keep_under().
  [[nodiscard]] int left_out() const { return left_out_; }

  /// Leaf tensors, in a fixed order.
  [[nodiscard]] std::vector<at::Tensor> parameters() const;
  /// α of (start, node) as stored, the leaf the optimiser steps: [2, rows, *P] (P: the node's
  /// initial_relaxation_params shape; rows: this rank's, from the first α row it owns), or
  /// feature-sparse [2, rows, B, U] (below); undefined when never used. Each use projects it
  /// (project_relaxation_params) unless that would change nothing.
  [[nodiscard]] at::Tensor get(int start, int node) const;
  /// The same α with every position: [2, rows, *P], the initial slopes where a feature-sparse α
  /// holds none.
  [[nodiscard]] at::Tensor dense(int start, int node) const;
  /// Bytes held by the α tensors.
  [[nodiscard]] int64_t bytes() const;

 private:
  const BoundGraph& g_;
  int64_t output_rows_;
  int rank_;
  int size_;
  /// Neurons of `start` that share one row of α: H·W for a shared convolutional start, else 1.
  [[nodiscard]] int64_t positions_per_row(int start) const;

  /// Sparse α of an intermediate start (initialise_from): [n] LongTensor, the rank of each
  /// neuron among the start's unstable ones, −1 for the others; undefined: every neuron a row.
  [[nodiscard]] at::Tensor sparse_positions(int start) const;

  struct Slopes {
    at::Tensor alpha;  // [2, rows, *P] or [2, rows, B, U]: α rows [first, first + rows)
    int64_t per_row = 1;
    int64_t first = 0;
    at::Tensor position;         // sparse: row id -> α position (sparse_positions), else undefined
    at::Tensor fixed;            // sparse: [2, 1, *P] initial slopes of the rows without α
    std::vector<int64_t> shape;  // [*P]
    // Feature-sparse (initialise_from): [U] the positions of a batch element's [*shape] that
    // hold α, and [B, F] the initial slopes read at the others; else undefined.
    at::Tensor features;
    at::Tensor base;
    // The input bounds α was last projected for, their version counters then (bounds changed
    // in place are other bounds), and α's version counter after it (prepare).
    Interval projected_for;
    std::array<int64_t, 2> projected_for_versions{-1, -1};
    int64_t projected_version = -1;
  };
  /// The α of (start, node), created on first use, projected for this pass's input bounds.
  Slopes& prepare(int start, int node, const at::Tensor& rows, std::span<const Interval* const> in);
  /// The rows of a pass (ids `rows`): [rows, *P], or read at the windows of `window`.
  [[nodiscard]] RelaxParams select(const Slopes& s, const at::Tensor& rows,
                                   const PatchesA* window) const;

  std::vector<std::optional<Interval>> init_;
  std::optional<BoundOptions> sparse_;
  int64_t limit_bytes_ = 0;
  collective::CommPtr in_step_;
  std::map<int, bool> optimised_;  // keep_under()'s decision per start, at its first pass
  int left_out_ = 0;
  std::map<std::pair<int, int>, Slopes> alpha_;
};

struct AlphaResult {
  Interval bounds;  // lower/upper [batch, spec] (a side not asked for is undefined)
  /// Elementwise best bounds of every node with CROWN/IBP bounds ([batch, *shape]); empty
  /// entries for the input and the output.
  std::vector<std::optional<Interval>> intermediate;
  /// α of the lower-bound optimisation at its best iteration for passes from the output: ReLU
  /// node -> [spec, batch, *shape] (the lA side). What β-CROWN starts from.
  /// Under spec-parallel bounding: this rank's rows only (AlphaSlopes::get).
  std::map<int, at::Tensor> output_alpha;
  int iterations_run = 0;
  /// Bytes of α this rank held (the larger of the two sides' optimisations).
  int64_t alpha_bytes = 0;
  /// Intermediate start nodes bounded without α to keep under context.memory_limit_bytes
  /// (AlphaSlopes::keep_under; the larger of the two sides' counts).
  int starts_left_out = 0;
  /// Whether the optimisation stopped early because an iteration's tensors passed
  /// context.memory_limit_bytes (the bounds are the best of the iterations so far).
  bool memory_limited = false;
};

/// α-CROWN bounds of C·output (C [spec, n_out], undefined = identity) over `box`. It stops
/// optimising at context.optimise_until (the best bounds so far are returned) and its passes at
/// context.checkpoint (DeadlineReached). With context.spec_comm (spec-parallel bounding,
/// CrownEngine) every pass's rows are split over its ranks, each rank holds and optimises the α
/// of its own rows, and every rank returns all bounds; gradients follow the `partial` convention
/// of collective/autograd.hpp (each rank differentiates 1/P of the loss). Tensor-parallel graphs
/// need no communicator here (their nodes carry it).
AlphaResult alpha_crown(const AlphaOptions& alpha, const PassContext& context, const BoundGraph& g,
                        const InputBox& box, const at::Tensor& C = {});

}  // namespace distcrown
