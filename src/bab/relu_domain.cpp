#include "relu_domain.hpp"

#include <set>

#include <ATen/ATen.h>

#include "distcrown/util/error.hpp"

namespace distcrown::bab::detail {

at::Tensor general_alpha(const at::Tensor& initial, int64_t K, int64_t neuron_dims) {
  std::vector<int64_t> rows{K};
  rows.insert(rows.end(), initial.sizes().begin(), initial.sizes().end());
  return general_alpha_from(initial.unsqueeze(0).expand(rows), initial, neuron_dims);
}

at::Tensor general_alpha_from(const at::Tensor& optimised, const at::Tensor& initial,
                              int64_t neuron_dims) {
  std::vector<int64_t> expected{optimised.size(0)};
  expected.insert(expected.end(), initial.sizes().begin(), initial.sizes().end());
  if (optimised.sizes() != at::IntArrayRef(expected)) {
    throw Error("internal: the root's alpha of a general node is shaped " +
                c10::str(optimised.sizes()) + ", not [K, *P] of its initial parameters");
  }
  // P = [1, *shape] (one parameter per neuron) stays; P = [k, 1, *shape] moves its batch to 1.
  const at::Tensor a = optimised.detach().to(initial.scalar_type());  // [K, *P]
  return (initial.dim() > neuron_dims ? a.movedim(2, 1) : a).contiguous();
}

Domain make_root(const BoundGraph& g, const ReluLayout& layout, int64_t K,
                 const std::vector<Interval>& bounds,
                 const std::map<int, at::Tensor>& output_alpha) {
  Domain d;
  for (size_t r = 0; r < layout.size(); ++r) {
    const Interval b{layout.whole(bounds[r].lower, r), layout.whole(bounds[r].upper, r)};
    d.lower.push_back(b.lower);
    d.upper.push_back(b.upper);
    std::vector<int64_t> shape{K};
    shape.insert(shape.end(), b.lower.sizes().begin(), b.lower.sizes().end());
    const auto it = output_alpha.find(layout.relu(r));
    const BoundNode& op = *g.node(layout.relu(r)).op;
    if (!layout.general(r)) {
      d.alpha.push_back(it != output_alpha.end()
                            ? layout.whole(it->second, r)
                            : op.initial_relaxation_params(b).expand(shape).clone());
    } else if (layout.has_alpha(r)) {
      const at::Tensor initial = op.initial_relaxation_params(b);  // [*P]
      d.alpha.push_back(it != output_alpha.end()
                            ? general_alpha_from(it->second, initial, b.lower.dim())
                            : general_alpha(initial, K, b.lower.dim()));
    } else {
      // Zeros stand in for the α of a node without parameters: every split node's tensors
      // batch alike.
      d.alpha.push_back(at::zeros(shape, b.lower.options()));
    }
    d.beta.push_back(at::zeros(shape, b.lower.options()));
    d.split.push_back(at::zeros_like(b.lower));
  }
  return d;
}

std::string split_refusal(const Domain& d, const ReluLayout& layout, const Split& split) {
  const std::optional<size_t> r = layout.index_of(split.node, split.input);
  if (!r) return "split on a node that branch and bound does not split";
  if (split.element < 0 || split.element >= d.lower[*r].numel()) {
    return "split neuron index out of range";
  }
  if (!layout.general(*r)) return split.point == 0.0 ? "" : "a ReLU is split at 0 only";
  const double l = d.lower[*r].view({-1})[split.element].item<double>();
  const double u = d.upper[*r].view({-1})[split.element].item<double>();
  return split.point > l && split.point < u
             ? ""
             : "a split point must lie strictly inside the neuron's interval";
}

Domain child(const Domain& parent, const ReluLayout& layout, const Split& split, int64_t id) {
  if (std::string why = split_refusal(parent, layout, split); !why.empty()) {
    throw Error("internal: " + why);
  }
  const size_t r = *layout.index_of(split.node, split.input);
  const int64_t j = split.element;
  const bool above = split.side == Split::Side::kAbove;
  Domain c = parent;  // shares every tensor with the parent
  c.id = id;
  c.floor = parent.value;
  c.lower[r] = parent.lower[r].clone();
  c.upper[r] = parent.upper[r].clone();
  c.split[r] = parent.split[r].clone();
  if (above) {
    c.lower[r].view({-1})[j] = split.point;  // z >= p
  } else {
    c.upper[r].view({-1})[j] = split.point;  // z <= p
  }
  // The marks say which neurons are split (the refreshed bounds start after the first) and are
  // β's signs s: s·(z − p) ≤ 0 on the child.
  c.split[r].view({-1})[j] = above ? -1.0 : 1.0;
  c.score = at::Tensor();
  return c;
}

at::Tensor cat_field(const std::vector<Domain>& ds, std::vector<at::Tensor> Domain::*field,
                     size_t r, int64_t dim) {
  std::vector<at::Tensor> parts;
  parts.reserve(ds.size());
  for (const Domain& d : ds) parts.push_back((d.*field)[r]);
  return at::cat(parts, dim);
}

size_t earliest_split(const std::vector<at::Tensor>& split) {
  for (size_t r = 0; r < split.size(); ++r) {
    if (split[r].ne(0).any().item<bool>()) return r;
  }
  return split.size();
}

DomainStoreBytes store_bytes(const std::vector<Domain>& queue, size_t relus) {
  DomainStoreBytes s;
  std::set<const void*> seen;  // children share tensors with their parents: count each once
  const auto add = [&](int64_t& acc, const at::Tensor& t) {
    if (t.defined() && seen.insert(t.storage().data()).second) acc += int64_t(t.nbytes());
  };
  for (const Domain& d : queue) {
    for (size_t r = 0; r < relus; ++r) {
      add(s.alpha, d.alpha[r]);
      add(s.beta, d.beta[r]);
      add(s.bounds, d.lower[r]);
      add(s.bounds, d.upper[r]);
      add(s.other, d.split[r]);
    }
    add(s.other, d.score);
  }
  return s;
}

}  // namespace distcrown::bab::detail
