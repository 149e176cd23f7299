#include "distcrown/bounds/patches.hpp"

#include <algorithm>

#include <ATen/ATen.h>

#include "distcrown/util/error.hpp"

namespace distcrown {

PatchesA PatchesA::with(at::Tensor l, at::Tensor u) const {
  PatchesA out = *this;
  out.lA = std::move(l);
  out.uA = std::move(u);
  return out;
}

PatchesA identity_patches(const at::Tensor& rows, int64_t C, int64_t H, int64_t W, int64_t batch,
                          const at::TensorOptions& options) {
  const int64_t R = rows.numel();
  const at::Tensor channel = at::div(rows, H * W, "floor");
  const at::Tensor pos = rows - channel * (H * W);
  at::Tensor eye = at::zeros({R, C}, options);
  eye.scatter_(1, channel.reshape({R, 1}).to(options.device()), 1.0);
  PatchesA p;
  p.lA = eye.reshape({R, 1, C, 1, 1}).expand({R, batch, C, 1, 1}).contiguous();
  p.uA = p.lA;
  p.row_h = at::div(pos, W, "floor");
  p.row_w = pos - p.row_h * W;
  p.grid = {H, W};
  return p;
}

namespace {

// Flat index into a node [H, W] of every window position of every row, H·W where the position is
// outside the node (a slot that reads zero / takes what is dropped): [R, kh·kw].
at::Tensor window_index(const PatchesA& p, int64_t H, int64_t W) {
  const auto [kh, kw] = p.kernel();
  const auto opts = p.row_h.options();
  const at::Tensor y = (p.row_h * p.stride[0] - p.padding[0]).reshape({-1, 1, 1}) +
                       at::arange(kh, opts).reshape({1, kh, 1});  // [R, kh, 1]
  const at::Tensor x = (p.row_w * p.stride[1] - p.padding[1]).reshape({-1, 1, 1}) +
                       at::arange(kw, opts).reshape({1, 1, kw});  // [R, 1, kw]
  const at::Tensor inside = (y >= 0) & (y < H) & (x >= 0) & (x < W);
  const at::Tensor flat = at::where(inside, y * W + x, at::full({}, H * W, opts));
  return flat.reshape({p.rows(), kh * kw});
}

}  // namespace

at::Tensor unfold_windows(const at::Tensor& x, const PatchesA& p) {
  // x [Bx, C, H, W] -> [Bx·C, H·W + 1] with a zero in the last slot -> gathered per window.
  const int64_t Bx = x.size(0);
  const int64_t C = x.size(1);
  const int64_t H = x.size(2);
  const int64_t W = x.size(3);
  const auto [kh, kw] = p.kernel();
  const at::Tensor flat =
      at::cat({x.reshape({Bx * C, H * W}), at::zeros({Bx * C, 1}, x.options())}, 1);
  const at::Tensor idx = window_index(p, H, W).to(x.device()).reshape({-1});
  return flat.index_select(1, idx).reshape({Bx, C, p.rows(), kh, kw}).permute({2, 0, 1, 3, 4});
}

at::Tensor gather_row_windows(const at::Tensor& x, const at::Tensor& index, const PatchesA& p) {
  const int64_t N = x.size(0);
  const int64_t Bx = x.size(1);
  const int64_t C = x.size(2);
  const int64_t H = x.size(3);
  const int64_t W = x.size(4);
  const auto [kh, kw] = p.kernel();
  const int64_t R = p.rows();
  if (index.numel() != R) throw Error("internal: gather_row_windows needs one index per row");
  // Window positions outside the node read position 0 and are zeroed: no padded copy of x.
  const at::Tensor flat = window_index(p, H, W).to(x.device());  // [R, kh·kw], H·W outside
  const at::Tensor inside = flat < H * W;
  const at::Tensor pos = at::where(inside, flat, at::zeros_like(flat));
  // x[index[r], :, pos[r, j]]: the advanced indices are split by a slice, so torch puts their
  // broadcast dims first: [R, kh·kw, Bx·C].
  const at::Tensor rows = index.to(x.device()).reshape({R, 1});
  at::Tensor got = x.reshape({N, Bx * C, H * W}).index({rows, at::indexing::Slice(), pos});
  got = got * inside.unsqueeze(2).to(x.scalar_type());
  return got.permute({0, 2, 1}).reshape({R, Bx, C, kh, kw});
}

at::Tensor window_mask(const PatchesA& p, int64_t H, int64_t W, const at::TensorOptions& options) {
  return unfold_windows(at::ones({1, 1, H, W}, options), p);
}

at::Tensor patches_to_dense(const at::Tensor& A, const PatchesA& p, int64_t H, int64_t W) {
  // Scatter each row's window into [H·W + 1] (the last slot takes the positions outside).
  const int64_t R = A.size(0);
  const int64_t B = A.size(1);
  const int64_t C = A.size(2);
  const auto [kh, kw] = p.kernel();
  const at::Tensor idx =
      window_index(p, H, W).to(A.device()).reshape({R, 1, kh * kw}).expand({R, B * C, kh * kw});
  at::Tensor dense = at::zeros({R, B * C, H * W + 1}, A.options());
  dense.scatter_(2, idx, A.reshape({R, B * C, kh * kw}));
  return dense.slice(2, 0, H * W).reshape({R, B, C, H, W});
}

BoundA to_dense(const PatchesA& p, int64_t H, int64_t W) {
  if (p.lA.defined() && p.lA.is_same(p.uA)) {
    at::Tensor d = patches_to_dense(p.lA, p, H, W);
    return {d, d};
  }
  return {p.lA.defined() ? patches_to_dense(p.lA, p, H, W) : at::Tensor(),
          p.uA.defined() ? patches_to_dense(p.uA, p, H, W) : at::Tensor()};
}

std::optional<PatchesA> add_patches(const PatchesA& a, const PatchesA& b) {
  if (a.stride != b.stride || a.grid != b.grid) return std::nullopt;
  if (!a.row_h.is_same(b.row_h) && (!at::equal(a.row_h, b.row_h) || !at::equal(a.row_w, b.row_w))) {
    return std::nullopt;
  }
  if (a.lA.defined() != b.lA.defined() || a.uA.defined() != b.uA.defined()) {
    throw Error("internal: adding patches with different sides");
  }
  // The union of the two windows: it starts `padding` before the row's anchor and has `kernel`
  // positions; each side is zero-padded to it.
  std::array<int64_t, 2> padding{};
  std::array<int64_t, 2> kernel{};
  const auto ka = a.kernel();
  const auto kb = b.kernel();
  for (size_t d = 0; d < 2; ++d) {
    padding[d] = std::max(a.padding[d], b.padding[d]);
    kernel[d] = std::max(ka[d] - a.padding[d], kb[d] - b.padding[d]) + padding[d];
  }
  const auto widen = [&](const at::Tensor& A, const PatchesA& p) {
    const auto k = p.kernel();
    const int64_t top = padding[0] - p.padding[0];
    const int64_t left = padding[1] - p.padding[1];
    if (top == 0 && left == 0 && k == kernel) return A;
    return at::constant_pad_nd(A, {left, kernel[1] - k[1] - left, top, kernel[0] - k[0] - top}, 0);
  };
  PatchesA out = a;
  out.padding = padding;
  const bool shared = a.lA.defined() && a.lA.is_same(a.uA) && b.lA.is_same(b.uA);
  if (shared) {
    out.lA = widen(a.lA, a) + widen(b.lA, b);
    out.uA = out.lA;
    return out;
  }
  if (a.lA.defined()) out.lA = widen(a.lA, a) + widen(b.lA, b);
  if (a.uA.defined()) out.uA = widen(a.uA, a) + widen(b.uA, b);
  return out;
}

at::Tensor window_dot(const at::Tensor& A, const at::Tensor& x) { return (A * x).sum({2, 3, 4}); }

Interval concretize_patches(const PatchesA& a, const BiasPair& bias, const InputBox& box) {
  const at::Tensor centre = unfold_windows((box.upper + box.lower) / 2, a);  // [R, B, C, kh, kw]
  const at::Tensor radius = unfold_windows((box.upper - box.lower) / 2, a);
  const auto side = [&](const at::Tensor& A, const at::Tensor& b, double sign) {
    if (!A.defined()) return at::Tensor();
    at::Tensor out = window_dot(A, centre) + sign * window_dot(A.abs(), radius);  // [R, B]
    if (b.defined()) out = out + b;
    return out.transpose(0, 1);  // [B, R]
  };
  return {side(a.lA, bias.lower, -1.0), side(a.uA, bias.upper, +1.0)};
}

}  // namespace distcrown
