#include "distcrown/bounds/interval.hpp"

#include <algorithm>

#include <ATen/ATen.h>

namespace distcrown {

void accumulate(at::Tensor& acc, const at::Tensor& term) {
  if (!term.defined()) return;
  if (!acc.defined()) {
    acc = term;
  } else {
    acc = acc + term;
  }
}

namespace {
// LibTorch's bmm (CPU) computes a product of fewer multiply-adds than this (rows·terms·columns)
// with its own loops, larger ones with BLAS; the two round differently.
constexpr int64_t kBmmLoopsBelow = 400;

// Σ_n A[s, b, n]·x[b, n] -> [S, B], for A [S, B, N] and x [B, N].
// A matrix–vector product would take BLAS's GEMV path, whose rounding depends on how many rows
// S there are; a product with zero columns beside x stays on the GEMM path, where each row's
// result does not depend on the other rows (see docs/architecture.md, "Row independence"). As
// many zero columns as put every aligned pass (S ≥ kRowAlign) on BLAS rather than bmm's loops: with
// N = 5 (ACAS Xu's inputs) and one zero column, 16-row passes took the loops and 48-row ones
// BLAS. Summing A ⊙ x over N instead is also row-independent but slower on ACAS Xu's boxes.
at::Tensor rowwise_dot(const at::Tensor& A, const at::Tensor& x) {
  const int64_t B = A.size(1);
  const int64_t N = x.size(1);
  const int64_t columns =
      std::max<int64_t>(2, (kBmmLoopsBelow + kRowAlign * N - 1) / (kRowAlign * N));
  const at::Tensor xc =
      at::cat({x.reshape({B, -1, 1}), at::zeros({B, N, columns - 1}, x.options())}, 2);
  return at::bmm(A.transpose(0, 1), xc).select(2, 0).transpose(0, 1);  // [B, S, C] -> [S, B]
}
}  // namespace

at::Tensor contract(const at::Tensor& A, const at::Tensor& x) {
  // A [S, B, *shape] -> [S, B, N];  x -> [B, N] broadcast; result [S, B].
  const int64_t S = A.size(0);
  const int64_t B = A.size(1);
  std::vector<int64_t> full(A.sizes().begin() + 1, A.sizes().end());
  return rowwise_dot(A.reshape({S, B, -1}), x.expand(full).reshape({B, -1}));
}

namespace {
at::Tensor concretize_side(const at::Tensor& A, const at::Tensor& bias, const at::Tensor& center,
                           const at::Tensor& radius, double sign) {
  if (!A.defined()) return {};
  const int64_t S = A.size(0);
  const int64_t B = A.size(1);
  const at::Tensor flatA = A.reshape({S, B, -1});
  const at::Tensor c = center.reshape({B, -1});
  const at::Tensor r = radius.reshape({B, -1});
  at::Tensor out = rowwise_dot(flatA, c) + sign * rowwise_dot(flatA.abs(), r);  // [S, B]
  if (bias.defined()) out = out + bias;
  return out.transpose(0, 1);  // [B, S]
}
}  // namespace

bool all_finite(const Interval& b) {
  for (const at::Tensor* t : {&b.lower, &b.upper}) {
    if (t->defined() && !at::isfinite(*t).all().item<bool>()) return false;
  }
  return true;
}

Interval concretize(const BoundA& a, const BiasPair& bias, const InputBox& box) {
  const at::Tensor center = (box.upper + box.lower) / 2;
  const at::Tensor radius = (box.upper - box.lower) / 2;
  return {concretize_side(a.lA, bias.lower, center, radius, -1.0),
          concretize_side(a.uA, bias.upper, center, radius, +1.0)};
}

}  // namespace distcrown
