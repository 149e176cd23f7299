#pragma once
// 2-D transposed convolution, groups = 1: x [batch, C_in, H, W], weight [C_in, C_out, kH, kW],
// bias [C_out] -> [batch, C_out, H_out, W_out] with, per spatial dim,
//   H_out = (H − 1)·stride − pad_begin − pad_end + dilation·(kH − 1) + output_padding + 1.
#include <array>

#include "distcrown/graph/bound_node.hpp"

namespace distcrown::ops {

struct ConvTranspose2dOptions {
  std::array<int64_t, 2> stride{1, 1};
  std::array<int64_t, 2> pad_begin{0, 0};  // top, left
  std::array<int64_t, 2> pad_end{0, 0};    // bottom, right
  std::array<int64_t, 2> output_padding{0, 0};
  std::array<int64_t, 2> dilation{1, 1};
};

NodePtr make_conv_transpose2d(ParamPtr weight, ParamPtr bias, ConvTranspose2dOptions options);

}  // namespace distcrown::ops
