#pragma once
// Collectives inside a differentiated computation. α-CROWN takes gradients through backward
// passes that communicate (tensor-parallel zones, spec-parallel row splits); a plain
// Communicator call writes into a buffer autograd knows nothing about and cuts the gradient.
// These are torch::autograd::Function subclasses over the Communicator whose backward makes the
// matching collective, so every rank's α gets the gradient it would get at P = 1.
//
// Two conventions for what a rank's gradient of a replicated tensor (the same value on every
// rank) means; a computation uses one of them throughout:
//   whole    every rank differentiates the whole loss; a replicated tensor's gradient is the whole
//            gradient on every rank. Tensor parallelism (Megatron-LM's pairs):
//              copy_to_shards      identity forward, AllReduce backward: where a replicated tensor
//                                  enters rank-local work (each rank sees only its share of the
//                                  uses, the shares sum to the whole gradient)
//              reduce_from_shards  AllReduce forward, identity backward: where rank-local partial
//                                  sums become replicated (the gradient is already whole)
//   partial  every rank differentiates 1/P of the loss; a replicated tensor's gradient is this
//            rank's share, the shares summing to the whole gradient. Spec-parallel bounding:
//              gather_from_ranks   AllGather forward, ReduceScatter backward
//            The gathered intermediate bounds feed every rank's own rows (rank-local, a different
//            share of the gradient on every rank) as well as replicated work, so the backward must
//            sum the shares; taking only this rank's slice would be right only if the gathered
//            tensor fed nothing rank-local (docs/architecture.md).
// All three are collective in the forward and in the backward: every rank must run the same
// differentiated computation (same graph, same order). Running the same passes on every rank
// (padding rows where a rank has fewer) gives the same forward, but not the same backward: a
// Function gets a backward node only where its input requires grad, which is data: a rank
// whose rows meet no α (all stable, or another rank's) skips a ReduceScatter the others wait in.
// And autograd runs independent nodes in an order of its own. BackwardOrder fixes both.
#include <ATen/core/Tensor.h>

#include "distcrown/collective/communicator.hpp"

namespace distcrown::collective {

/// Identity forward; backward AllReduce (sum) of the gradient. `x` any shape, contiguous or not.
at::Tensor copy_to_shards(const at::Tensor& x, const CommPtr& comm);

/// AllReduce (sum) forward; identity backward.
at::Tensor reduce_from_shards(const at::Tensor& x, const CommPtr& comm);

/// x [n, *] -> [P·n, *]: every rank's x, rank-major along dim 0. Backward: this rank's block of
/// the gradients summed over ranks (ReduceScatter).
at::Tensor gather_from_ranks(const at::Tensor& x, const CommPtr& comm);

/// Ties the collectives of one differentiated computation into a chain, so that every rank
/// makes their backward collectives, all of them and in reverse forward order, whatever its
/// data: before each collective, `tie(x)` adds to x an exact zero (the sum of an empty slice)
/// of the previous collective's output (a leaf for the first), so x requires grad on every
/// rank and the previous collective's backward waits for this one's; after it, `link(out)`.
/// Does nothing while grad mode is off. One per differentiated computation (one CrownEngine).
class BackwardOrder {
 public:
  [[nodiscard]] at::Tensor tie(const at::Tensor& x);
  void link(const at::Tensor& out);

 private:
  at::Tensor last_;  // [0] slice of the last collective's output (or a [0] leaf), grad-tracked
};

}  // namespace distcrown::collective
