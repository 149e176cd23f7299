#include "distcrown/methods/ibp.hpp"

#include <ATen/ATen.h>

namespace distcrown {

std::vector<Interval> ibp_all(const BoundGraph& g, const InputBox& box) {
  std::vector<Interval> iv(size_t(g.size()));
  iv[0] = box;
  std::vector<const Interval*> args;
  for (int i = 1; i < g.size(); ++i) {
    args.clear();
    for (int p : g.node(i).inputs) args.push_back(&iv[size_t(p)]);
    iv[size_t(i)] = g.node(i).op->ibp(args);
  }
  return iv;
}

Interval apply_spec(const Interval& y, const at::Tensor& C) {
  const int64_t B = y.lower.size(0);
  const at::Tensor lo = y.lower.reshape({B, -1});
  const at::Tensor hi = y.upper.reshape({B, -1});
  if (!C.defined()) return {lo, hi};
  // [B, n] x [n, spec]: positive coefficients take the same side, negative the other.
  const at::Tensor Cy = C.to(lo.options());  // the spec may come from the CPU, y from a GPU
  const at::Tensor pos = Cy.clamp_min(0).t();
  const at::Tensor neg = Cy.clamp_max(0).t();
  return {lo.matmul(pos) + hi.matmul(neg), hi.matmul(pos) + lo.matmul(neg)};
}

Interval ibp_bounds(const BoundGraph& g, const InputBox& box, const at::Tensor& C) {
  auto iv = ibp_all(g, box);
  return apply_spec(iv[size_t(g.output())], C);
}

}  // namespace distcrown
