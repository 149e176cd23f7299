#pragma once
// Tensor-parallel partitioning (`--shard tp`, `--shard tp-exact`): rewrites a loaded graph so that
// every chain Linear -> elementwise op without parameters (ReLU) -> Linear, found by capability
// (OpTraits::dense_matrix, ::elementwise), becomes a "sharded zone" BoundLinearTPCol -> Relu ->
// BoundLinearTPRow (ops/linear_tp.hpp): the hidden neurons between the two Linears are split
// over the ranks (balanced, uneven widths allowed), each rank keeps its rows of the first weight
// and its columns of the second. What lies outside zones stays replicated. The two plans rewrite
// the graph identically; they differ in how CROWN bounds the neurons inside zones
// (BoundOptions::sharded_intermediate).
#include <cstdint>
#include <string>
#include <vector>

#include "distcrown/collective/communicator.hpp"
#include "distcrown/graph/bound_graph.hpp"

namespace distcrown::sharding {

using collective::CommPtr;

/// This rank's share of n features over P ranks: the first n % P ranks get one more.
struct Split {
  int64_t offset = 0;
  int64_t width = 0;
};
Split balanced_split(int64_t n, int P, int rank);

struct TpZone {
  int col = -1;        // node index of the first Linear (now BoundLinearTPCol)
  int relu = -1;       // the elementwise node between them (a Relu)
  int row = -1;        // the second Linear (now BoundLinearTPRow)
  int64_t hidden = 0;  // neurons of the zone over all ranks
  Split local;         // this rank's neurons
};

struct TpPlan {
  int world = 1;
  std::vector<TpZone> zones;
  int64_t sharded_param_bytes = 0;     // this rank's bytes of zone weights after partitioning
  int64_t replicated_param_bytes = 0;  // bytes of parameters outside zones (held by every rank)
};

/// Rewrites `graph` in place: a Linear node i (2-D output [batch, h], h >= P, not the output)
/// whose only user is node i+1, an elementwise node without parameters whose only user is node
/// i+2, a Linear, becomes a zone.
/// Zones are contiguous in topological order, so no other node runs between a zone's Row and
/// Col in a backward pass (ops/linear_tp.hpp relies on it). Local: no communication.
TpPlan partition_tensor_parallel(BoundGraph& graph, const CommPtr& comm);

/// Human-readable plan: one line per zone and the parameter bytes per rank.
std::string describe(const TpPlan& plan, const BoundGraph& graph);

}  // namespace distcrown::sharding
