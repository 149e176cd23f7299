#include "distcrown/methods/crown.hpp"

#include <map>

#include <ATen/ATen.h>

#include "distcrown/methods/ibp.hpp"
#include "distcrown/util/error.hpp"

namespace distcrown {
namespace {

int64_t per_batch_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (size_t i = 1; i < shape.size(); ++i) n *= shape[i];
  return n;
}

// Adds b into a (A matrices reaching one node along several paths). Keeps lA and uA one tensor
// while both sides are the same tensor, so the shared prefix of a backward pass is computed once.
void add_into(BoundA& a, const BoundA& b) {
  const bool a_shared = a.lA.defined() && a.lA.is_same(a.uA);
  const bool b_shared = b.lA.defined() && b.lA.is_same(b.uA);
  if (a_shared && b_shared) {
    a.lA = a.lA + b.lA;
    a.uA = a.lA;
    return;
  }
  accumulate(a.lA, b.lA);
  accumulate(a.uA, b.uA);
}

}  // namespace

CrownEngine::CrownEngine(const BoundGraph& g, InputBox box, BoundOptions options)
    : g_(g), box_(std::move(box)), opt_(options), bounds_(size_t(g.size())) {
  if (opt_.crown_batch_size < 0) throw InvalidArgument("crown batch size must be >= 0");
  bounds_[0] = box_;
}

void CrownEngine::compute_intermediate_bounds() {
  std::vector<const Interval*> args;
  for (int i = 1; i < g_.size(); ++i) {
    if (i == g_.output()) continue;  // bounded by output_bounds() with the spec
    args.clear();
    for (int p : g_.node(i).inputs) args.push_back(&*bounds_[size_t(p)]);
    Interval reference = g_.node(i).op->ibp(args);  // one IBP step from the bounds so far
    if (g_.is_pre_activation(i) && !g_.affine_from_input(i)) {
      bounds_[size_t(i)] = refine(i, reference);
    } else {
      bounds_[size_t(i)] = std::move(reference);
    }
  }
}

Interval CrownEngine::refine(int i, const Interval& reference) {
  const int64_t B = reference.lower.size(0);
  const int64_t n = per_batch_numel(g_.node(i).shape);
  const at::Tensor lo = reference.lower.reshape({B, n});
  const at::Tensor hi = reference.upper.reshape({B, n});
  if (opt_.scheme == IntermediateScheme::kTight) {
    const Interval c = chunked_rows(i, at::arange(n, at::kLong));
    return {at::maximum(c.lower, lo).reshape(reference.lower.sizes()),
            at::minimum(c.upper, hi).reshape(reference.upper.sizes())};
  }
  // Unstable under the reference in any batch element: [n] mask.
  const at::Tensor unstable = ((lo < 0) & (hi > 0)).any(0);
  const at::Tensor rows = unstable.nonzero().reshape({-1});
  const int64_t k = rows.numel();
  if (k == 0) return reference;
  if (double(k) > opt_.minimum_sparsity * double(n)) {
    const Interval c = chunked_rows(i, at::arange(n, at::kLong));
    return {c.lower.reshape(reference.lower.sizes()), c.upper.reshape(reference.upper.sizes())};
  }
  const Interval c = chunked_rows(i, rows);
  at::Tensor new_lo = lo.clone();
  at::Tensor new_hi = hi.clone();
  new_lo.index_copy_(1, rows, c.lower);
  new_hi.index_copy_(1, rows, c.upper);
  return {new_lo.reshape(reference.lower.sizes()), new_hi.reshape(reference.upper.sizes())};
}

Interval CrownEngine::chunked_rows(int start, const at::Tensor& rows) {
  const int64_t k = rows.numel();
  const int64_t chunk = opt_.crown_batch_size > 0 ? opt_.crown_batch_size : k;
  if (chunk >= k) return backward_rows(start, rows);
  std::vector<at::Tensor> lower, upper;
  for (int64_t s = 0; s < k; s += chunk) {
    const Interval part = backward_rows(start, rows.slice(0, s, std::min(k, s + chunk)));
    lower.push_back(part.lower);
    upper.push_back(part.upper);
  }
  return {at::cat(lower, 1), at::cat(upper, 1)};
}

namespace {
// One-hot rows of a node: [k, B, *shape] with A[j, b, rows[j]] = 1. Returned as the only
// reference, so the backward pass can free it after the first step.
at::Tensor one_hot_rows(const at::Tensor& rows, const std::vector<int64_t>& shape, int64_t B,
                        const at::TensorOptions& options) {
  const int64_t n = per_batch_numel(shape);
  const int64_t k = rows.numel();
  at::Tensor eye = at::zeros({k, B, n}, options);
  eye.scatter_(2, rows.reshape({k, 1, 1}).expand({k, B, 1}), 1.0);
  std::vector<int64_t> full{k, B};
  full.insert(full.end(), shape.begin() + 1, shape.end());
  return eye.reshape(full);
}
}  // namespace

Interval CrownEngine::backward_rows(int start, const at::Tensor& rows) {
  at::Tensor A = one_hot_rows(rows, g_.node(start).shape, box_.lower.size(0), box_.lower.options());
  BoundA a{A, A};
  A = {};
  return backward_from(start, std::move(a));
}

Interval CrownEngine::backward_from(int start, BoundA a) {
  std::map<int, BoundA> pending;  // A matrices waiting at a node, [spec, batch, *shape]
  pending.emplace(start, std::move(a));
  BiasPair bias;
  std::vector<const Interval*> in_bounds;
  for (int i = start; i >= 1; --i) {
    auto it = pending.find(i);
    if (it == pending.end()) continue;
    BoundA here = std::move(it->second);
    pending.erase(it);
    const GraphNode& node = g_.node(i);
    in_bounds.clear();
    for (int p : node.inputs) {
      const auto& b = bounds_[size_t(p)];
      if (node.op->needs_input_bounds() && !b) {
        throw Error("internal: bounds of node '" + g_.node(p).name + "' needed before computed");
      }
      in_bounds.push_back(b ? &*b : nullptr);
    }
    std::vector<BoundA> outs = node.op->backward(here, in_bounds, bias);
    here = {};  // the node's A is no longer needed
    for (size_t j = 0; j < node.inputs.size(); ++j) {
      auto [slot, inserted] = pending.try_emplace(node.inputs[j], std::move(outs[j]));
      if (!inserted) add_into(slot->second, outs[j]);
    }
  }
  const auto it = pending.find(0);
  if (it == pending.end()) throw Error("internal: backward pass did not reach the input");
  const int64_t spec = it->second.lA.defined() ? it->second.lA.size(0) : it->second.uA.size(0);
  const int64_t B = box_.lower.size(0);
  // A node fed only by constants contributes nothing but its bias; keep shapes [spec, B].
  if (!bias.lower.defined()) bias.lower = at::zeros({spec, B}, box_.lower.options());
  if (!bias.upper.defined()) bias.upper = at::zeros({spec, B}, box_.lower.options());
  return concretize(it->second, bias, box_);
}

Interval CrownEngine::output_bounds(const at::Tensor& C) {
  const int out = g_.output();
  const auto& shape = g_.node(out).shape;
  const int64_t B = box_.lower.size(0);
  const int64_t n = per_batch_numel(shape);
  Interval result;
  if (!C.defined()) {
    result = chunked_rows(out, at::arange(n, at::kLong));
  } else {
    if (C.dim() != 2 || C.size(1) != n) {
      throw InvalidArgument("spec matrix C must be [spec, " + std::to_string(n) + "]");
    }
    std::vector<int64_t> full{C.size(0), B};
    full.insert(full.end(), shape.begin() + 1, shape.end());
    at::Tensor A = C.to(box_.lower.scalar_type())
                       .reshape({C.size(0), 1, n})
                       .expand({C.size(0), B, n})
                       .reshape(full);
    BoundA a{A, A};
    A = {};
    result = backward_from(out, std::move(a));
  }
  if (opt_.scheme == IntermediateScheme::kTight) {
    std::vector<const Interval*> args;
    for (int p : g_.node(out).inputs) args.push_back(&*bounds_[size_t(p)]);
    const Interval ibp = apply_spec(g_.node(out).op->ibp(args), C);
    result = {at::maximum(result.lower, ibp.lower), at::minimum(result.upper, ibp.upper)};
  }
  return result;
}

Interval compute_bounds(const BoundGraph& g, const InputBox& box, Method method,
                        const BoundOptions& options, const at::Tensor& C) {
  if (method == Method::kIbp) return ibp_bounds(g, box, C);
  CrownEngine engine(g, box, options);
  engine.compute_intermediate_bounds();
  return engine.output_bounds(C);
}

}  // namespace distcrown
