#pragma once
// The walk every CROWN backward pass takes (crown.cpp's dense passes, crown_patches.cpp's): from
// `start` down to node 1 in topological order, each node's pending A (its consumers' sum) handed
// to `step`, which returns one A per input of the node; the node's own A is freed, then each is
// put in the form its input takes (`settle`) and added into the input's pending A (`add`, when
// the input already has one). Between nodes the
// checkpoint runs (it may throw DeadlineReached; the pass's A matrices are then freed). Internal
// to methods/.
#include <map>
#include <utility>
#include <vector>

#include "distcrown/graph/bound_graph.hpp"
#include "distcrown/util/deadline.hpp"

namespace distcrown {

template <class A, class Step, class Settle, class Add>
void walk_backward(const BoundGraph& g, int start, std::map<int, A>& pending,
                   const Checkpoint& checkpoint, Step&& step, Settle&& settle, Add&& add) {
  for (int i = start; i >= 1; --i) {
    auto it = pending.find(i);
    if (it == pending.end()) continue;
    checkpoint();
    A here = std::move(it->second);
    pending.erase(it);
    const GraphNode& node = g.node(i);
    std::vector<A> outs = step(i, node, here);
    here = {};  // the node's A is no longer needed
    for (size_t j = 0; j < node.inputs.size(); ++j) {
      const int p = node.inputs[j];
      settle(outs[j], p);
      // try_emplace leaves the input's A alone when the node already has one.
      auto [slot, inserted] = pending.try_emplace(p, std::move(outs[j]));
      if (!inserted) add(slot->second, std::move(outs[j]), p);
    }
  }
}

}  // namespace distcrown
