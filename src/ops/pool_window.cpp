#include "ops/pool_window.hpp"

#include "graph/op_registry.hpp"

namespace distcrown::ops {
namespace {

// Attribute values above this are refused before any arithmetic on them (a hostile model's
// 2^62 must not overflow a sum); no real pooling window comes near it.
constexpr int64_t kMaxWindowValue = int64_t{1} << 31;

std::string list_string(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

}  // namespace

std::vector<int64_t> PoolWindow::torch_pads() const { return {pads[1], pads[3], pads[0], pads[2]}; }

std::vector<int64_t> PoolWindow::torch_crop() const {
  return {-pads[1], -pads[3], -pads[0], -pads[2]};
}

std::array<int64_t, 2> PoolWindow::output_size(int64_t H, int64_t W) const {
  return {(H + pads[0] + pads[2] - kernel[0]) / stride[0] + 1,
          (W + pads[1] + pads[3] - kernel[1]) / stride[1] + 1};
}

PoolWindow read_pool_window(const LoweringContext& ctx) {
  if (!ctx.has_input(0)) ctx.fail("missing input 0");
  const Value& x = ctx.inputs[0];
  const std::vector<int64_t> in =
      x.is_constant() ? std::vector<int64_t>(x.constant.sizes().begin(), x.constant.sizes().end())
                      : ctx.builder.shape(x.node);
  if (in.size() != 4) {
    ctx.unsupported(ctx.op_type + " on a " + std::to_string(in.size()) +
                    "-D input (only 2-D pooling of [batch, C, H, W])");
  }
  const auto& a = ctx.attrs;
  if (!a.int_lists.count("kernel_shape")) ctx.fail("missing attribute kernel_shape");
  const auto kernel = a.get_ints("kernel_shape", {});
  const auto strides = a.get_ints("strides", {1, 1});
  const auto dilations = a.get_ints("dilations", {1, 1});
  const std::string auto_pad = a.get_string("auto_pad", "NOTSET");
  if (kernel.size() != 2 || strides.size() != 2 || dilations.size() != 2) {
    ctx.fail("kernel_shape, strides and dilations must have 2 entries for a 2-D input");
  }
  for (const auto& [name, v] : {std::pair{"kernel_shape", kernel}, {"strides", strides}}) {
    for (int64_t k : v) {
      if (k < 1 || k > kMaxWindowValue) ctx.fail(std::string(name) + " " + list_string(v));
    }
  }
  if (dilations != std::vector<int64_t>{1, 1}) {
    ctx.unsupported(ctx.op_type + " with dilations " + list_string(dilations));
  }
  if (a.get_int("ceil_mode", 0) != 0) ctx.unsupported(ctx.op_type + " with ceil_mode=1");
  if (auto_pad != "NOTSET" && auto_pad != "VALID") {
    ctx.unsupported(ctx.op_type + " with auto_pad=" + auto_pad);
  }
  const auto pads = a.get_ints("pads", {0, 0, 0, 0});
  if (pads.size() != 4) ctx.fail("pads must have 4 entries for a 2-D input");
  PoolWindow w;
  for (size_t d = 0; d < 2; ++d) {
    w.kernel[d] = kernel[d];
    w.stride[d] = strides[d];
  }
  for (size_t i = 0; i < 4; ++i) {
    if (pads[i] < 0) ctx.fail("negative pads " + list_string(pads));
    if (auto_pad == "VALID" && pads[i] != 0) ctx.fail("auto_pad=VALID with nonzero pads");
    // A pad as large as the kernel leaves windows made of padding only (no value for MaxPool,
    // 0/0 for AveragePool without the padding counted).
    if (pads[i] >= w.kernel[i % 2]) {
      ctx.unsupported(ctx.op_type + " with pads " + list_string(pads) + " not below the kernel " +
                      list_string(kernel));
    }
    w.pads[i] = pads[i];
  }
  for (size_t d = 0; d < 2; ++d) {
    if (in[2 + d] + w.pads[d] + w.pads[d + 2] < w.kernel[d]) {
      ctx.fail("kernel_shape " + list_string(kernel) + " larger than the padded input " +
               list_string(in));
    }
  }
  return w;
}

}  // namespace distcrown::ops
