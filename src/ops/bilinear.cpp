#include "ops/bilinear.hpp"

#include <limits>

#include <ATen/ATen.h>

#include "ops/elementwise_lines.hpp"

namespace distcrown::ops {
namespace {

// A [S, B, *out] summed over the dims that `shape` ([B, *in]) broadcast to *out.
at::Tensor sum_to_input(const at::Tensor& A, const std::vector<int64_t>& shape, int64_t B) {
  std::vector<int64_t> full{A.size(0), B};
  full.insert(full.end(), shape.begin() + 1, shape.end());
  return A.sum_to_size(full);
}

// Σ over the node dims of A ⊙ c -> [S, B]; c [B, *out].
at::Tensor bias_of(const at::Tensor& A, const at::Tensor& c) {
  return (A * c).reshape({A.size(0), A.size(1), -1}).sum(2);
}

// One McCormick plane of x·y, as auto_LiRPA interpolates them for α-CROWN (MulHelper): the two
// lower planes (through (x_l, y_l) and (x_u, y_u)) and the two upper planes (through (x_u, y_l)
// and (x_l, y_u)) are mixed by r ∈ [0, 1]; r = 1 is CROWN's plane above:
//   lower  x·y ≥ a·x + b·y + c,  a = y_u + (y_l − y_u)·r,  b = x_u + (x_l − x_u)·r,
//                                c = (y_u·x_u − y_l·x_l)·r − y_u·x_u
//   upper  x·y ≤ a·x + b·y + c,  a = y_l + (y_u − y_l)·r,  b = x_u + (x_l − x_u)·r,
//                                c = (y_l·x_u − y_u·x_l)·r − y_l·x_u
// Each is a convex combination of two valid planes of the same side, hence valid.
struct Plane {
  at::Tensor a;  // slope in x
  at::Tensor b;  // slope in y
  at::Tensor c;  // constant
};

Plane plane(bool upper, const at::Tensor& xl, const at::Tensor& xu, const at::Tensor& yl,
            const at::Tensor& yu, const at::Tensor& r) {
  const at::Tensor b = xu + (xl - xu) * r;
  if (upper) return {yl + (yu - yl) * r, b, (yl * xu - yu * xl) * r - yl * xu};
  return {yu + (yl - yu) * r, b, (yu * xu - yl * xl) * r - yu * xu};
}

// α of the planes: [2, B, *out] per row and side (index 0 the lower plane's r, 1 the upper
// plane's), starting at CROWN's planes (r = 1); projected onto [0, 1] (the default).
at::Tensor initial_plane_params(const std::vector<int64_t>& out, const Interval& in) {
  std::vector<int64_t> full{2, in.lower.size(0)};
  full.insert(full.end(), out.begin() + 1, out.end());
  return at::ones(full, in.lower.options());
}

// x·y where neither is NaN, 0·(±∞) read as 0: a bound's infinity stands for "unbounded", and the
// product of an unbounded factor with an exact 0 is 0.
at::Tensor corner(const at::Tensor& x, const at::Tensor& y) {
  return at::where((x == 0) | (y == 0), at::zeros({}, x.options()), x * y);
}

class BoundBilinearMul final : public BoundNode {
 public:
  explicit BoundBilinearMul(std::optional<std::pair<double, double>> range) : range_(range) {}
  std::string op_type() const override { return "Mul"; }
  OpTraits traits() const override {
    return {.needs_input_bounds = true, .relaxation_params = true, .splits_operands = true};
  }
  at::Tensor initial_relaxation_params(const Interval& in) const override {
    return initial_plane_params(output_shape(), in);
  }

  at::Tensor forward(std::span<const at::Tensor> x) const override { return x[0] * x[1]; }

  Interval ibp(std::span<const Interval* const> v) const override {
    const Interval& x = *v[0];
    const Interval& y = *v[1];
    const at::Tensor p0 = corner(x.lower, y.lower);
    const at::Tensor p1 = corner(x.lower, y.upper);
    const at::Tensor p2 = corner(x.upper, y.lower);
    const at::Tensor p3 = corner(x.upper, y.upper);
    Interval out{at::minimum(at::minimum(p0, p1), at::minimum(p2, p3)),
                 at::maximum(at::maximum(p0, p1), at::maximum(p2, p3))};
    if (range_) {
      out.lower = out.lower.clamp(range_->first, range_->second);
      out.upper = out.upper.clamp(range_->first, range_->second);
    }
    return out;
  }

  std::vector<BoundA> backward(const BoundA& a, std::span<const Interval* const> bounds,
                               BiasPair& bias) const override {
    const Interval& x = *bounds[0];
    const Interval& y = *bounds[1];
    // The planes' coefficients on the output's shape [B, *out].
    std::vector<int64_t> out = output_shape();  // [1, *out] -> [B, *out]
    out[0] = x.lower.size(0);
    const at::Tensor xl = x.lower.expand(out);
    const at::Tensor yl = y.lower.expand(out);
    const at::Tensor yu = y.upper.expand(out);
    const at::Tensor c_lower = -xl * yl;
    const at::Tensor c_upper = -xl * yu;
    const int64_t B = x.lower.size(0);
    std::vector<BoundA> res(2);
    // Where a plane is not finite (x_l, y_l or y_u infinite), no A passes through the element and
    // a row with a coefficient there is unbounded on its side.
    const at::Tensor finite = at::isfinite(xl) & at::isfinite(yl) & at::isfinite(yu);
    const bool all = finite.all().item<bool>();
    const at::Tensor zero = at::zeros({}, xl.options());
    const auto keep = [&](const at::Tensor& t) { return all ? t : at::where(finite, t, zero); };
    // pos takes the plane of the side's own direction, neg the other.
    const auto side = [&](const at::Tensor& A, bool upper, at::Tensor& acc, at::Tensor& Ax,
                          at::Tensor& Ay) {
      const at::Tensor pos = keep(A.clamp_min(0));
      const at::Tensor neg = keep(A - A.clamp_min(0));
      const at::Tensor& a_pos = upper ? yu : yl;
      const at::Tensor& a_neg = upper ? yl : yu;
      Ax = sum_to_input(pos * keep(a_pos) + neg * keep(a_neg), input_shape(0), B);
      // Both planes have slope x_l in y.
      Ay = sum_to_input(keep(A) * keep(xl), input_shape(1), B);
      accumulate(acc, bias_of(pos, keep(upper ? c_upper : c_lower)));
      accumulate(acc, bias_of(neg, keep(upper ? c_lower : c_upper)));
      if (!all) {
        const double inf = std::numeric_limits<double>::infinity();
        bound_lost_rows(acc, (A != 0) & ~finite, upper ? inf : -inf, A.scalar_type());
      }
    };
    if (a.lA.defined()) side(a.lA, false, bias.lower, res[0].lA, res[1].lA);
    if (a.uA.defined()) side(a.uA, true, bias.upper, res[0].uA, res[1].uA);
    return res;
  }

  std::vector<BoundA> backward_relaxed(const BoundA& a, std::span<const Interval* const> bounds,
                                       BiasPair& bias, const RelaxParams& p) const override {
    if (!p.alpha_l.defined() && !p.alpha_u.defined()) return backward(a, bounds, bias);
    const Interval& x = *bounds[0];
    const Interval& y = *bounds[1];
    // The interpolated planes read x_u and y_u: where a bound is not finite, CROWN's planes.
    if (!all_finite(x) || !all_finite(y)) return backward(a, bounds, bias);
    std::vector<int64_t> out = output_shape();
    const int64_t B = x.lower.size(0);
    out[0] = B;
    const at::Tensor xl = x.lower.expand(out);
    const at::Tensor xu = x.upper.expand(out);
    const at::Tensor yl = y.lower.expand(out);
    const at::Tensor yu = y.upper.expand(out);
    std::vector<BoundA> res(2);
    // r [S, 2, B, *out]: the side's own plane takes A⁺, the other A⁻.
    const auto side = [&](const at::Tensor& A, const at::Tensor& r, bool upper, at::Tensor& acc,
                          at::Tensor& Ax, at::Tensor& Ay) {
      const at::Tensor pos = A.clamp_min(0);
      const at::Tensor neg = A - pos;
      const Plane own = plane(upper, xl, xu, yl, yu, r.select(1, upper ? 1 : 0));
      const Plane other = plane(!upper, xl, xu, yl, yu, r.select(1, upper ? 0 : 1));
      Ax = sum_to_input(pos * own.a + neg * other.a, input_shape(0), B);
      Ay = sum_to_input(pos * own.b + neg * other.b, input_shape(1), B);
      accumulate(acc, bias_of(pos, own.c) + bias_of(neg, other.c));
    };
    if (a.lA.defined()) side(a.lA, p.alpha_l, false, bias.lower, res[0].lA, res[1].lA);
    if (a.uA.defined()) side(a.uA, p.alpha_u, true, bias.upper, res[0].uA, res[1].uA);
    return res;
  }

 private:
  std::optional<std::pair<double, double>> range_;
};

class BoundBilinearMatMul final : public BoundNode {
 public:
  std::string op_type() const override { return "MatMul"; }
  OpTraits traits() const override {
    return {.needs_input_bounds = true, .relaxation_params = true, .splits_operands = true};
  }
  at::Tensor initial_relaxation_params(const Interval& in) const override {
    // One r per term x_ik·y_kj: P = [2, B, .., n, m, k].
    std::vector<int64_t> terms = output_shape();
    terms.push_back(input_shape(0).back());
    return initial_plane_params(terms, in);
  }

  at::Tensor forward(std::span<const at::Tensor> x) const override {
    return at::matmul(x[0], x[1]);
  }

  Interval ibp(std::span<const Interval* const> v) const override {
    // Per term x_ik·y_kj: [.., n, k, 1] × [.., 1, k, m] -> corners, then Σ_k.
    const auto outer = [](const at::Tensor& a, const at::Tensor& b) {
      return a.unsqueeze(-1) * b.unsqueeze(-3);
    };
    const Interval& x = *v[0];
    const Interval& y = *v[1];
    const at::Tensor p0 = outer(x.lower, y.lower);
    const at::Tensor p1 = outer(x.lower, y.upper);
    const at::Tensor p2 = outer(x.upper, y.lower);
    const at::Tensor p3 = outer(x.upper, y.upper);
    return {at::minimum(at::minimum(p0, p1), at::minimum(p2, p3)).sum(-2),
            at::maximum(at::maximum(p0, p1), at::maximum(p2, p3)).sum(-2)};
  }

  std::vector<BoundA> backward(const BoundA& a, std::span<const Interval* const> bounds,
                               BiasPair& bias) const override {
    // Every term x_ik·y_kj takes the planes above; summed over k they give, for A [S, B, .., n, m]
    // on the output: A_x = A⁺·y_lᵀ + A⁻·y_uᵀ (lower side; y_u/y_l swapped for the upper side),
    // A_y = x_lᵀ·A, and the constant −Σ_ij A_ij (x_l·y_{l|u})_ij.
    const Interval& x = *bounds[0];
    const Interval& y = *bounds[1];
    const at::Tensor xlT = x.lower.transpose(-1, -2);  // [B, .., k, n]
    const at::Tensor ylT = y.lower.transpose(-1, -2);  // [B, .., m, k]
    const at::Tensor yuT = y.upper.transpose(-1, -2);
    const at::Tensor c_lower = -at::matmul(x.lower, y.lower);  // [B, .., n, m]
    const at::Tensor c_upper = -at::matmul(x.lower, y.upper);
    std::vector<BoundA> res(2);
    const auto side = [&](const at::Tensor& A, bool upper, at::Tensor& acc, at::Tensor& Ax,
                          at::Tensor& Ay) {
      const at::Tensor pos = A.clamp_min(0);
      const at::Tensor neg = A - pos;
      Ax = at::matmul(pos, upper ? yuT : ylT) + at::matmul(neg, upper ? ylT : yuT);
      Ay = at::matmul(xlT, A);
      accumulate(acc, bias_of(pos, upper ? c_upper : c_lower));
      accumulate(acc, bias_of(neg, upper ? c_lower : c_upper));
    };
    if (a.lA.defined()) side(a.lA, false, bias.lower, res[0].lA, res[1].lA);
    if (a.uA.defined()) side(a.uA, true, bias.upper, res[0].uA, res[1].uA);
    return res;
  }

  std::vector<BoundA> backward_relaxed(const BoundA& a, std::span<const Interval* const> bounds,
                                       BiasPair& bias, const RelaxParams& p) const override {
    if (!p.alpha_l.defined() && !p.alpha_u.defined()) return backward(a, bounds, bias);
    // Every term x_ik·y_kj has its own planes: the bounds as [B, .., n, m, k] (x [.., n, 1, k],
    // y transposed [.., 1, m, k]), A [S, B, .., n, m] -> [.., n, m, 1].
    const Interval& x = *bounds[0];
    const Interval& y = *bounds[1];
    const at::Tensor xl = x.lower.unsqueeze(-2);
    const at::Tensor xu = x.upper.unsqueeze(-2);
    const at::Tensor yl = y.lower.transpose(-1, -2).unsqueeze(-3);
    const at::Tensor yu = y.upper.transpose(-1, -2).unsqueeze(-3);
    std::vector<BoundA> res(2);
    const auto side = [&](const at::Tensor& A, const at::Tensor& r, bool upper, at::Tensor& acc,
                          at::Tensor& Ax, at::Tensor& Ay) {
      const at::Tensor pos = A.clamp_min(0).unsqueeze(-1);
      const at::Tensor neg = A.clamp_max(0).unsqueeze(-1);
      const Plane own = plane(upper, xl, xu, yl, yu, r.select(1, upper ? 1 : 0));
      const Plane other = plane(!upper, xl, xu, yl, yu, r.select(1, upper ? 0 : 1));
      Ax = (pos * own.a + neg * other.a).sum(-2);                    // [S, B, .., n, k]
      Ay = (pos * own.b + neg * other.b).sum(-3).transpose(-1, -2);  // [S, B, .., k, m]
      const at::Tensor c = pos * own.c + neg * other.c;
      accumulate(acc, c.reshape({c.size(0), c.size(1), -1}).sum(2));
    };
    if (a.lA.defined()) side(a.lA, p.alpha_l, false, bias.lower, res[0].lA, res[1].lA);
    if (a.uA.defined()) side(a.uA, p.alpha_u, true, bias.upper, res[0].uA, res[1].uA);
    return res;
  }
};

}  // namespace

NodePtr make_bilinear_mul(std::optional<std::pair<double, double>> range) {
  return std::make_unique<BoundBilinearMul>(range);
}
NodePtr make_bilinear_matmul() { return std::make_unique<BoundBilinearMatMul>(); }

}  // namespace distcrown::ops
