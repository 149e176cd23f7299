#pragma once
// Resize and Upsample in modes nearest and linear: separable along each resized axis d, a
// matrix M_d [out_d, in_d] with non-negative rows summing to 1 (one 1 for nearest, two weights
// for linear) gives y = x ×_d M_d over those axes. The matrices follow ONNX's reference
// implementation (onnx.reference.ops.op_resize): coordinate transformation, then the nearest
// index or the two neighbours, out-of-range neighbours clamped to the edge.
#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "distcrown/graph/bound_node.hpp"

namespace distcrown::ops {

struct ResizeAxisRule {
  std::string mode = "nearest";                          // nearest | linear
  std::string coordinate_transformation = "half_pixel";  // ONNX's names
  std::string nearest_mode = "round_prefer_floor";       // ONNX's names
};

/// M [out_len, in_len] in float64 for one axis resized by `scale` to `out_len`, by `rule`.
/// Throws InvalidArgument for a mode or transformation outside those named above.
at::Tensor resize_matrix(int64_t in_len, int64_t out_len, double scale, const ResizeAxisRule& rule);

struct ResizeAxis {
  int64_t axis = 1;   // a dim of x [batch, ...], ≥ 1
  at::Tensor matrix;  // [out, in], float64
};

NodePtr make_resize(std::vector<ResizeAxis> axes);

}  // namespace distcrown::ops
