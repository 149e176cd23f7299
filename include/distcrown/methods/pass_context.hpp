#pragma once
// What bounding passes carry that is not configuration (option structs hold configuration only):
// when they stop, whom they tell, and which ranks share their rows. The caller makes one per run
// and passes it to CrownEngine, alpha_crown and compute_bounds; branch and bound's RunContext
// (bab/bab.hpp) makes its passes' from its own.
#include <cstdint>
#include <utility>

#include "distcrown/collective/communicator.hpp"
#include "distcrown/util/deadline.hpp"

namespace distcrown {

struct PassContext {
  /// Called between the nodes of every CROWN pass and between α-CROWN iterations: past its
  /// deadline it throws DeadlineReached, which unwinds the pass (default: never).
  Checkpoint checkpoint;
  /// α-CROWN stops optimising once this has expired and returns its best bounds so far (checked
  /// between iterations; default: never). Across ranks it must be agreed (Deadline::agreed_by)
  /// so that every rank stops at the same iteration.
  Deadline optimise_until;
  /// Spec-parallel bounding: the ranks the rows of every pass are split over (null: this rank
  /// alone). All of them call the same passes in the same order.
  collective::CommPtr spec_comm;
  /// Tensor bytes (of the graph's device) the passes may hold, 0: no limit. α-CROWN keeps
  /// under it (AlphaSlopes::keep_under): the intermediate starts it reaches with more than half
  /// of it live are bounded by CROWN without autograd, and the optimisation stops with its best
  /// bounds so far once an iteration holds more than the limit.
  int64_t memory_limit_bytes = 0;
  /// The ranks that run these passes in step (verify's root: every rank; null: spec_comm's, or
  /// this rank alone): what the memory limit decides is decided on the most any of them holds,
  /// so that all take the same passes.
  collective::CommPtr in_step;

  /// A copy that keeps to `bytes` of tensors, decided over the ranks of `in_step`.
  [[nodiscard]] PassContext limited_to(int64_t bytes, collective::CommPtr in_step = {}) const {
    PassContext c = *this;
    c.memory_limit_bytes = bytes;
    c.in_step = std::move(in_step);
    return c;
  }

  /// Passes that stop at `checkpoint`, on this rank alone, whose α optimisation is not cut short.
  static PassContext stopping_at(Checkpoint checkpoint) {
    PassContext c;
    c.checkpoint = std::move(checkpoint);
    return c;
  }
  /// Passes that stop at `checkpoint`, and an α-CROWN that stops optimising at its deadline
  /// (what a verification phase runs in).
  static PassContext within(Checkpoint checkpoint) {
    PassContext c;
    c.optimise_until = checkpoint.deadline;
    c.checkpoint = std::move(checkpoint);
    return c;
  }
  /// The context of a spec-parallel run with no deadline.
  static PassContext spread_over(collective::CommPtr comm) {
    PassContext c;
    c.spec_comm = std::move(comm);
    return c;
  }
};

}  // namespace distcrown
