#pragma once
// What bounding passes carry that is not configuration (option structs hold configuration only):
// when they stop, whom they tell, and which ranks share their rows. The caller makes one per run
// and passes it to CrownEngine, alpha_crown and compute_bounds; branch and bound's RunContext
// (bab/bab.hpp) makes its passes' from its own.
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
