#pragma once
// The engine's door for optimised relaxations (α-CROWN, β-CROWN): in every backward pass, each
// node with optimisable slopes asks the hook for its parameters. Rows are identified by the start
// node and the row ids of that start (neuron indices of an intermediate start, spec-row indices of
// the output), so one α tensor per (start, node) pair serves passes over any subset of rows.
#include <span>

#include <ATen/core/Tensor.h>

#include "distcrown/bounds/interval.hpp"
#include "distcrown/graph/bound_node.hpp"

namespace distcrown {

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

  /// The A reaching `node`'s output in a pass from `start` ([r, batch, *shape]), before the node
  /// maps it: what branching heuristics score neurons with. Called for every node with slopes
  /// and for the input (node 0, the A that is concretized over the box).
  virtual void observe(int /*start*/, int /*node*/, const BoundA& /*a*/) {}
};

}  // namespace distcrown
