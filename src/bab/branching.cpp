#include "bab/branching.hpp"

#include <algorithm>

#include <ATen/ATen.h>

namespace distcrown::bab {

BabsrScores babsr_scores(const at::Tensor& A, const at::Tensor& row_weight, const at::Tensor& lower,
                         const at::Tensor& upper, const at::Tensor& bias, bool take_max) {
  const at::Tensor l = lower.clamp_max(0).unsqueeze(0);  // [1, B, N]
  const at::Tensor u = upper.clamp_min(0).unsqueeze(0);
  // Stable neurons: u⁺ − l⁻ = 0 where both are zero; their slope is irrelevant (masked below).
  const at::Tensor slope = u / (u - l).clamp_min(1e-12);
  const at::Tensor icept = -l * slope;
  const at::Tensor intercept_k = A.clamp_max(0) * icept;  // [K, B, N]
  const at::Tensor bA = bias.unsqueeze(0) * A;
  const at::Tensor off = bA * (slope - 1);
  const at::Tensor on = bA * slope;
  const at::Tensor score_k =
      ((take_max ? at::maximum(off, on) : at::minimum(off, on)) + intercept_k).abs();
  const at::Tensor weight = row_weight.to(A.scalar_type());
  const at::Tensor rows = weight.sum(0).clamp_min(1);  // [B, 1]
  const at::Tensor unstable = (lower < 0) & (upper > 0);
  const at::Tensor zero = at::zeros({}, A.options());
  return {at::where(unstable, (score_k * weight).sum(0) / rows, zero),
          at::where(unstable, (intercept_k * weight).sum(0) / rows, zero)};
}

std::optional<double> split_point_at(double l, double u, double ratio, at::ScalarType dtype) {
  const double p = at::scalar_tensor(l + ratio * (u - l), at::TensorOptions().dtype(at::kDouble))
                       .to(dtype)
                       .item<double>();
  if (!(p > l && p < u)) return std::nullopt;
  return p;
}

std::optional<double> split_midpoint(double l, double u, at::ScalarType dtype) {
  return split_point_at(l, u, 0.5, dtype);  // 0.5·(u − l) is (u − l) / 2 exactly
}

at::Tensor general_scores(const at::Tensor& A, const at::Tensor& row_weight,
                          const at::Tensor& lower, const at::Tensor& upper,
                          const at::Tensor& height) {
  const at::Tensor weight = row_weight.to(A.scalar_type());
  const at::Tensor rows = weight.sum(0).clamp_min(1);                      // [B, 1]
  const at::Tensor score = (A.abs() * weight).sum(0) / rows * height / 4;  // [B, N]
  // The same midpoint as split_midpoint's: computed in double, rounded to the bounds' dtype.
  const at::Tensor l = lower.to(at::kDouble);
  const at::Tensor u = upper.to(at::kDouble);
  const at::Tensor mid = (l + (u - l) / 2).to(lower.scalar_type()).to(at::kDouble);
  const at::Tensor inside = (mid > l) & (mid < u);
  return at::where(inside, score.to(lower.scalar_type()), at::full_like(lower, kUnsplittable));
}

int64_t babsr_choice(const at::Tensor& scores) {
  const auto [best, at] = scores.max(1);  // per row: [2]
  const double s = best[0].item<double>();
  if (s < 0) return -1;  // every neuron kUnsplittable
  if (s > kScoreInformative) return at[0].item<int64_t>();
  if (best[1].item<double>() > kCandidateInformative) return at[1].item<int64_t>();
  return at[0].item<int64_t>();
}

std::vector<int64_t> fsb_candidates(const at::Tensor& scores, int k) {
  std::vector<int64_t> out;
  const int64_t n = std::min<int64_t>(k, scores.size(1));
  if (n > 0) {
    const auto [values, index] = scores.topk(n, 1);  // [2, n], best first
    const at::Tensor v = values.to(at::kDouble).contiguous();
    const at::Tensor i = index.contiguous();
    for (int64_t row = 0; row < 2; ++row) {
      for (int64_t j = 0; j < n; ++j) {
        if (v[row][j].item<double>() <= kCandidateInformative) break;
        const int64_t flat = i[row][j].item<int64_t>();
        if (std::find(out.begin(), out.end(), flat) == out.end()) out.push_back(flat);
      }
    }
  }
  if (out.empty()) {
    if (const int64_t c = babsr_choice(scores); c >= 0) out.push_back(c);
  }
  return out;
}

}  // namespace distcrown::bab
