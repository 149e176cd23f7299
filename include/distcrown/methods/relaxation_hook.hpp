#pragma once
// The engine's door for optimised relaxations (α-CROWN, β-CROWN): in every backward pass, each
// node with optimisable slopes asks the hook for its parameters. Rows are identified by the start
// node and the row ids of that start (neuron indices of an intermediate start, spec-row indices of
// the output), so one α tensor per (start, node) pair serves passes over any subset of rows.
#include <algorithm>
#include <cstdint>
#include <span>

#include <ATen/core/Tensor.h>

#include "distcrown/bounds/interval.hpp"
#include "distcrown/bounds/patches.hpp"
#include "distcrown/graph/bound_node.hpp"
#include "distcrown/util/error.hpp"

namespace distcrown {

/// Spec-parallel ownership of a start node's rows (ids 0..n-1: its neurons, or the spec rows of
/// the output) when passes carry optimised relaxations: rank `rank` of `size` owns the ids
/// [begin, end) (balanced, the first n % size ranks one more) and bounds exactly those, so the
/// parameters of a row live on one rank whichever rows a pass asks for (CrownEngine::bound_rows,
/// AlphaSlopes).
struct RowRange {
  int64_t begin = 0;
  int64_t end = 0;
};
inline RowRange owned_rows(int64_t n, int size, int rank) {
  const int64_t base = n / size;
  const int64_t extra = n % size;
  const int64_t begin = rank * base + std::min<int64_t>(rank, extra);
  return {begin, begin + base + (rank < extra ? 1 : 0)};
}

class RelaxationHook {
 public:
  virtual ~RelaxationHook() = default;
  RelaxationHook() = default;
  RelaxationHook(const RelaxationHook&) = delete;
  RelaxationHook& operator=(const RelaxationHook&) = delete;

  /// Parameters of node `node` in the pass from `start` over `rows` (LongTensor [r], the pass's
  /// spec rows, padded rows repeated); `in` holds the node's input bounds ([batch, *shape]).
  virtual RelaxParams params(int start, int node, const at::Tensor& rows,
                             std::span<const Interval* const> in) = 0;

  /// Whether passes from a [C, H, W] start may carry patches A (ConvMode::kPatches) with this
  /// hook: it then answers window_params() and is not observe()d on those passes.
  [[nodiscard]] virtual bool takes_patches() const { return false; }

  /// params() for a pass whose A reaches `node` as patches `a`: each row's parameters read at
  /// its window, [r, batch, C, kh, kw] (zeros outside the node); only when takes_patches().
  virtual RelaxParams window_params(int /*start*/, int /*node*/, const at::Tensor& /*rows*/,
                                    std::span<const Interval* const> /*in*/,
                                    const PatchesA& /*a*/) {
    throw Error("internal: window_params() asked of a hook that does not take patches");
  }

  /// Whether params() depends on which neurons a pass's rows are. A hook that does not (it only
  /// observes) lets an intermediate pass give each batch element rows of its own neurons
  /// (CrownEngine::refine_each).
  [[nodiscard]] virtual bool reads_rows() const { return true; }

  /// The A reaching `node`'s output in a pass from `start` ([r, batch, *shape]), before the node
  /// maps it: what branching heuristics score neurons with. Called for every node with slopes
  /// and for the input (node 0, the A that is concretized over the box).
  virtual void observe(int /*start*/, int /*node*/, const BoundA& /*a*/) {}

  /// Whether the passes from intermediate start `start` carry this hook's parameters. When not,
  /// the engine bounds that start with CROWN's own relaxations and without autograd (its bounds
  /// are constants to what follows): α-CROWN under a memory limit.
  [[nodiscard]] virtual bool optimises(int /*start*/) { return true; }

  /// Whether the hook carries point-split multipliers for `node` (a node with
  /// OpTraits::splits_anywhere or splits_operands; RelaxParams::point_splits): the node is then
  /// observe()d and asked params() even without relaxation parameters, and the engine adds the
  /// β terms.
  [[nodiscard]] virtual bool splits_at_points(int /*node*/) const { return false; }
};

}  // namespace distcrown
