#pragma once
// What a ReLU-splitting domain (domain.hpp's Domain) is made of and how one is made from
// another: the root over given intermediate bounds, a child by one split, the batch tensors
// the bounding passes concatenate, and the bytes a queue of them holds.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "bab/split.hpp"
#include "distcrown/bab/bab.hpp"
#include "distcrown/bounds/interval.hpp"
#include "distcrown/graph/bound_graph.hpp"
#include "domain.hpp"
#include "relu_layout.hpp"

namespace distcrown::bab::detail {

/// A domain without splits over `bounds` (each ReLU input's, this rank's neurons under TP), with
/// the output α of `output_alpha` where given (the root α-CROWN's: ReLU node -> [K, 1, *shape],
/// general node -> [K, *P]), else CROWN's slopes or the op's initial parameters; β = 0. Domains
/// keep every neuron (ReluLayout::whole).
Domain make_root(const BoundGraph& g, const ReluLayout& layout, int64_t K,
                 const std::vector<Interval>& bounds,
                 const std::map<int, at::Tensor>& output_alpha);

/// A general node's α as domains keep it, from its op's initial parameters `initial` ([1, *shape]
/// or [k, 1, *shape]; `neuron_dims` = 1 + the shape's dims) for K rows: [K, 1, *shape] or
/// [K, 1, k, *shape] (the batch at dim 1, as every field of a domain batches). Ops read
/// [rows, *P] (relu_bounding.cpp moves the batch back).
at::Tensor general_alpha(const at::Tensor& initial, int64_t K, int64_t neuron_dims);
/// The same layout from α-CROWN's optimised output α of the node ([K, *P], P = initial's
/// shape).
at::Tensor general_alpha_from(const at::Tensor& optimised, const at::Tensor& initial,
                              int64_t neuron_dims);

/// Why `split` cannot split `d` (empty when it can): its node is not one of `layout`'s, its
/// element is out of range, a ReLU's point is not 0, or a general node's is not strictly inside
/// the element's interval.
std::string split_refusal(const Domain& d, const ReluLayout& layout, const Split& split);

/// The child of `parent` on one side of `split` (a ReLU of `layout` at 0, or a general node at a
/// point strictly inside the element's interval), with the parent's value as its floor. It
/// shares every tensor with its parent but the three it changes: the split input's bounds
/// (clamped at the point) and split marks (+1 below, -1 above).
Domain child(const Domain& parent, const ReluLayout& layout, const Split& split, int64_t id);

/// (*field)[r] of every domain, concatenated along `dim`.
at::Tensor cat_field(const std::vector<Domain>& ds, std::vector<at::Tensor> Domain::*field,
                     size_t r, int64_t dim);

/// Index of the first ReLU with a split in any domain of the batch (split[r]: [B, *shape]);
/// the number of ReLUs when none has one.
size_t earliest_split(const std::vector<at::Tensor>& split);

/// Bytes the domains hold by kind, each tensor counted once (children share their parents').
DomainStoreBytes store_bytes(const std::vector<Domain>& queue, size_t relus);

}  // namespace distcrown::bab::detail
