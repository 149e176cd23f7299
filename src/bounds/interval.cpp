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
// Products over fewer terms than this are padded with zero terms (below).
constexpr int64_t kMinDotTerms = 16;

// Σ_n A[s, b, n]·x[b, n] -> [S, B], for A [S, B, N] and x [B, N].
// A matrix–vector product would take BLAS's GEMV path, whose rounding depends on how many rows
// S there are; a product with a second, zero column stays on the GEMM path, where each row's
// result does not depend on the other rows (see docs/architecture.md, "Row independence").
// LibTorch's bmm also computes products of fewer than 400 multiply-adds (rows·N·2) with its own
// loops and larger ones with BLAS, which round differently: with N = 5 (ACAS Xu's inputs) a
// pass of 16 rows took the loops and one of 48 BLAS. With N padded to 16 terms every pass of
// 16 rows or more (the aligned ones) is a BLAS product.
at::Tensor rowwise_dot(const at::Tensor& A, const at::Tensor& x) {
  const int64_t B = A.size(1);
  const int64_t pad = std::max<int64_t>(kMinDotTerms - A.size(2), 0);
  const at::Tensor a = pad > 0 ? at::constant_pad_nd(A, {0, pad}) : A;
  const at::Tensor xs = pad > 0 ? at::constant_pad_nd(x, {0, pad}) : x;
  const at::Tensor x2 =
      at::cat({xs.reshape({B, -1, 1}), at::zeros({B, xs.size(1), 1}, xs.options())}, 2);
  return at::bmm(a.transpose(0, 1), x2).select(2, 0).transpose(0, 1);  // [B, S, 2] -> [S, B]
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
