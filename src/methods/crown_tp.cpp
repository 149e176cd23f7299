// CROWN intermediate bounds of tensor-parallel neurons (the `tp-exact` plan). A Col node's output
// is [batch, w] on each rank, a slice of `global` neurons. Bounding "this rank's unstable neurons"
// separately per rank would give each rank different rows, but the earlier zones' Col nodes sum
// each row's shares over the ranks: all ranks must propagate the same rows. So the rows are
// chosen over all ranks (one AllGather of the unstable masks), the start matrix of a row is its
// one-hot restricted to this rank's columns ([r, B, w], zero where the neuron lives on another
// rank), the start Col's AllReduce assembles the whole row at its input, and the pass continues
// as any replicated pass. Every rank ends with the bounds of every row and keeps its own.
// Communication per bounded layer: the mask AllGather (global floats) plus one AllReduce of
// [r, B, in] per zone the pass crosses, including the start's (docs/architecture.md).
#include <ATen/ATen.h>

#include "distcrown/collective/autograd.hpp"
#include "distcrown/collective/communicator.hpp"
#include "distcrown/methods/crown.hpp"
#include "distcrown/util/error.hpp"

namespace distcrown {
namespace {

// Rows [r, B, w] of a start matrix: A[j, b, c] = 1 where global neuron rows[j] is this rank's
// column c. rows: LongTensor [r] (CPU) of global indices.
at::Tensor sharded_one_hot(const at::Tensor& rows, const OutputShard& s, int64_t B,
                           const at::TensorOptions& options) {
  const int64_t r = rows.numel();
  at::Tensor eye = at::zeros({r, s.width}, options);  // [r, w]
  const at::Tensor local = rows - s.offset;
  const at::Tensor here = ((local >= 0) & (local < s.width)).nonzero().reshape({-1});
  if (here.numel() > 0) {
    const at::Tensor flat = here * s.width + local.index_select(0, here);
    eye.view({-1}).index_fill_(0, flat.to(options.device()), 1.0);
  }
  return eye.unsqueeze(1).expand({r, B, s.width}).contiguous();
}

}  // namespace

Interval CrownEngine::refine_sharded(int i, const Interval& reference, const OutputShard& s) {
  const int64_t B = reference.lower.size(0);
  const at::Tensor lo = reference.lower.reshape({B, s.width});
  const at::Tensor hi = reference.upper.reshape({B, s.width});
  const auto options = box_.lower.options();
  at::Tensor rows;  // global neuron indices to bound, [k] (CPU)
  // Every neuron, as refine(): the tight scheme, and a node before an S-shaped function.
  bool every = opt_.scheme != IntermediateScheme::kAutoLirpa || !g_.feeds_splittable(i);
  if (!every) {
    // The neurons unstable under the reference, over all ranks: each rank's mask ([w], 1 =
    // unstable) padded with −1 to ceil(global / P) so the AllGather has equal parts.
    if (!g_.tensor_parallel_group())
      throw Error("internal: a sharded node in a graph without a group");
    collective::Communicator& comm = *g_.tensor_parallel_group();
    const int P = comm.size();
    const int64_t per = (s.global + P - 1) / P;
    at::Tensor mine = at::full({per}, -1.0, options);
    mine.slice(0, 0, s.width).copy_(((lo < 0) & (hi > 0)).any(0));
    at::Tensor masks = at::empty({P * per}, options);  // [P·per]
    comm.all_gather(mine, masks);
    const at::Tensor flags = masks.cpu();
    const at::Tensor unstable = flags.masked_select(flags.ge(0)).gt(0.5);  // [global]
    rows = unstable.nonzero().reshape({-1});
    const int64_t k = rows.numel();
    if (k == 0) return reference;
    every = double(k) > opt_.minimum_sparsity * double(s.global);  // as refine(), over all ranks
  }
  if (every) rows = at::arange(s.global, at::kLong);
  // The rows' ids for the relaxation hook are the global neuron indices (as refine()'s).
  Interval c = bound_rows(
      i, rows.numel(),
      [&](const at::Tensor& idx) {
        return sharded_one_hot(rows.index_select(0, idx.cpu()), s, B, options);
      },
      rows.to(options.device()));  // [B, k] each, every rank the same
  if (c.lower.requires_grad() || c.upper.requires_grad()) {
    // α-CROWN: every rank keeps only its own neurons of these replicated bounds, so each sees its
    // share of their gradient (collective/autograd.hpp, convention `whole`).
    c = {collective::copy_to_shards(c.lower, g_.tensor_parallel_group()),
         collective::copy_to_shards(c.upper, g_.tensor_parallel_group())};
  }
  // This rank's neurons among the rows: positions j in `rows`, columns local[j] here.
  const at::Tensor local = rows - s.offset;
  const at::Tensor j = ((local >= 0) & (local < s.width)).nonzero().reshape({-1});
  const at::Tensor cols = local.index_select(0, j).to(options.device());
  const at::Tensor jd = j.to(options.device());
  at::Tensor new_lo = lo.clone();
  at::Tensor new_hi = hi.clone();
  new_lo.index_copy_(1, cols, c.lower.index_select(1, jd));
  new_hi.index_copy_(1, cols, c.upper.index_select(1, jd));
  if (intersects_ibp(opt_.scheme)) {
    new_lo = at::maximum(new_lo, lo);
    new_hi = at::minimum(new_hi, hi);
  }
  return {new_lo.reshape(reference.lower.sizes()), new_hi.reshape(reference.upper.sizes())};
}

}  // namespace distcrown
