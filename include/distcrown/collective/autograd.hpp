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
// differentiated computation (same graph, same order), which the bounding code guarantees by
// running the same passes on every rank (padding rows where a rank has fewer).
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

}  // namespace distcrown::collective
