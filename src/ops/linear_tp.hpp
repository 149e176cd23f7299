#pragma once
// Tensor-parallel linear layers (Megatron-LM's ColumnParallelLinear / RowParallelLinear), for the
// "sharded zones" Col -> elementwise ops -> Row that sharding/partitioner.hpp builds. With a layer
// y = x Wᵀ + b, W [out, in], over P ranks:
//
//   BoundLinearTPCol  W sharded along `out`: this rank holds W[off:off+w, :] and b[off:off+w].
//                     Input replicated [batch, in], output this rank's neurons [batch, w].
//                     forward/IBP local. Backward: A [S, B, w] -> A·W_r [S, B, in] is a partial
//                     sum over ranks, as is the bias term A·b_r: one AllReduce (sum) of A and
//                     the pass's bias makes both whole and replicated again.
//   BoundLinearTPRow  W sharded along `in`: this rank holds W[:, off:off+w], b whole.
//                     Input this rank's slice [batch, w], output replicated [batch, out].
//                     forward and IBP (centre and radius) are partial sums: one AllReduce.
//                     Backward local: A [S, B, out] -> A·W_r [S, B, w].
//
// The bias of a backward pass inside a zone is a partial sum: the Row turns the pass's
// (replicated) bias into one (rank 0 keeps it, the other ranks restart from zero), the ReLUs add
// their local intercept terms, and the Col's AllReduce sums it back. This needs every node between
// a Row and its Col to be inside the zone, which the partitioner guarantees (contiguous zones).
#include "distcrown/collective/communicator.hpp"
#include "distcrown/graph/bound_node.hpp"

namespace distcrown::ops {

/// `weight` [w, in] and `bias` [w] (may be null): rows [shard.offset, shard.offset + w) of the
/// full layer's, w = shard.width; `group` the ranks the features are split over.
NodePtr make_linear_tp_col(ParamPtr weight, ParamPtr bias, OutputShard shard,
                           collective::CommPtr group);

/// `weight` [out, w]: columns [offset, offset + w) of the full layer's; `bias` [out] whole (may
/// be null).
NodePtr make_linear_tp_row(ParamPtr weight, ParamPtr bias, collective::CommPtr comm);

}  // namespace distcrown::ops
