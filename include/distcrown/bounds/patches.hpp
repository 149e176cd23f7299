#pragma once
// Patches: a compact form of the A matrices of rows that start on a [C, H, W] node (auto_LiRPA's
// conv_mode='patches'). A row of a dense A holds a coefficient for every element of the node it
// sits on; a convolutional network makes those rows zero outside a window that grows by one kernel
// per layer, so a patches A keeps only the window:
//   A       [R, batch, C, kh, kw]   row r's coefficients on the window of the node it sits on
//   row_h, row_w  [R] (long)        row r's position on the grid of the start node (grid)
//   stride, padding                  the window of row r starts at node coordinates
//                                    (row_h·stride[0] − padding[0], row_w·stride[1] − padding[1])
// Coefficients at window positions outside the node (the zero padding of a later convolution)
// stand for nothing: every consumer masks them (unfold_windows reads zeros there).
#include <array>
#include <cstdint>
#include <optional>

#include "distcrown/bounds/interval.hpp"

namespace distcrown {

struct PatchesA {
  at::Tensor lA;     // [R, batch, C, kh, kw] or undefined
  at::Tensor uA;     // the same shape and geometry, or undefined; may be the same tensor as lA
  at::Tensor row_h;  // [R] long
  at::Tensor row_w;  // [R] long
  std::array<int64_t, 2> grid{1, 1};  // H, W of the start node (the range of row_h, row_w)
  std::array<int64_t, 2> stride{1, 1};
  std::array<int64_t, 2> padding{0, 0};

  [[nodiscard]] const at::Tensor& any() const { return lA.defined() ? lA : uA; }
  [[nodiscard]] int64_t rows() const { return any().size(0); }
  [[nodiscard]] std::array<int64_t, 2> kernel() const { return {any().size(3), any().size(4)}; }
  /// Same geometry, other coefficients.
  [[nodiscard]] PatchesA with(at::Tensor l, at::Tensor u) const;
};

/// The start of a pass from rows `rows` (long [R], flat indices into [C, H, W]) of a node of shape
/// [C, H, W]: one-hot 1×1 windows, [R, batch, C, 1, 1].
PatchesA identity_patches(const at::Tensor& rows, int64_t C, int64_t H, int64_t W, int64_t batch,
                          const at::TensorOptions& options);

/// x [Bx, C, H, W] read at every row's window: [R, Bx, C, kh, kw], zeros outside the node.
at::Tensor unfold_windows(const at::Tensor& x, const PatchesA& p);

/// Per-row tensors read at their own row's window: x [N, Bx, C, H, W] (N candidate rows), row
/// `index[r]` (long [R]) of x read at row r's window of `p`: [R, Bx, C, kh, kw], zeros outside the
/// node. What α-CROWN's slopes (one [C, H, W] tensor per row) become in a patches pass, without
/// first copying the R selected rows whole.
at::Tensor gather_row_windows(const at::Tensor& x, const at::Tensor& index, const PatchesA& p);

/// 1 inside the node [H, W], 0 outside: [R, 1, 1, kh, kw] in `options`' dtype.
at::Tensor window_mask(const PatchesA& p, int64_t H, int64_t W, const at::TensorOptions& options);

/// The dense A of one side: [R, batch, C, H, W] (window positions outside the node dropped).
at::Tensor patches_to_dense(const at::Tensor& A, const PatchesA& p, int64_t H, int64_t W);

/// Both sides dense, sharing kept.
BoundA to_dense(const PatchesA& p, int64_t H, int64_t W);

/// a + b when the two have the same rows and stride (windows aligned by zero padding); nullopt
/// when they cannot be added as patches (the caller goes dense).
std::optional<PatchesA> add_patches(const PatchesA& a, const PatchesA& b);

/// Applies `map` to both sides, once when they are the same tensor (map_sides for patches).
template <class Map>
PatchesA map_patch_sides(const PatchesA& a, Map&& map) {
  if (a.lA.defined() && a.lA.is_same(a.uA)) {
    at::Tensor m = map(a.lA);
    return a.with(m, m);
  }
  return a.with(a.lA.defined() ? map(a.lA) : at::Tensor(),
                a.uA.defined() ? map(a.uA) : at::Tensor());
}

/// Σ over each row's window of A ⊙ x, A and x [R, batch, C, kh, kw]: [R, batch].
at::Tensor window_dot(const at::Tensor& A, const at::Tensor& x);

/// concretize() for patches on the input node [batch, C, H, W]: lower/upper [batch, R].
Interval concretize_patches(const PatchesA& a, const BiasPair& bias, const InputBox& box);

}  // namespace distcrown
