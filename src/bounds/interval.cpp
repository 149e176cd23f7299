#include "distcrown/bounds/interval.hpp"

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

at::Tensor contract(const at::Tensor& A, const at::Tensor& x) {
  // A [S, B, *shape] -> [S, B, N];  x -> [B, N] broadcast; result [S, B].
  const int64_t S = A.size(0);
  const int64_t B = A.size(1);
  const at::Tensor flatA = A.reshape({S, B, -1});
  std::vector<int64_t> full(A.sizes().begin() + 1, A.sizes().end());
  const at::Tensor flatX = x.expand(full).reshape({B, -1, 1});
  // [B, S, N] @ [B, N, 1] -> [B, S, 1]
  return at::bmm(flatA.transpose(0, 1), flatX).squeeze(-1).transpose(0, 1);
}

namespace {
at::Tensor concretize_side(const at::Tensor& A, const at::Tensor& bias, const at::Tensor& center,
                           const at::Tensor& radius, double sign) {
  if (!A.defined()) return {};
  const int64_t S = A.size(0);
  const int64_t B = A.size(1);
  // [B, S, N] @ [B, N, 1] -> [B, S]
  const at::Tensor flatA = A.reshape({S, B, -1}).transpose(0, 1);
  const at::Tensor c = center.reshape({B, -1, 1});
  const at::Tensor r = radius.reshape({B, -1, 1});
  at::Tensor out = at::bmm(flatA, c).squeeze(-1) + sign * at::bmm(flatA.abs(), r).squeeze(-1);
  if (bias.defined()) out = out + bias.transpose(0, 1);
  return out;
}
}  // namespace

Interval concretize(const BoundA& a, const BiasPair& bias, const InputBox& box) {
  const at::Tensor center = (box.upper + box.lower) / 2;
  const at::Tensor radius = (box.upper - box.lower) / 2;
  return {concretize_side(a.lA, bias.lower, center, radius, -1.0),
          concretize_side(a.uA, bias.upper, center, radius, +1.0)};
}

}  // namespace distcrown
