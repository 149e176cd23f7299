#include "ops/pad.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include <ATen/ATen.h>

#include "graph/op_registry.hpp"

namespace distcrown::ops {
namespace {

// Pads beyond this are refused before any arithmetic on them (no real model comes near it).
constexpr int64_t kMaxPad = int64_t{1} << 31;
// The most elements a padded tensor may have, as for every tensor of a model.
constexpr int64_t kMaxElements = int64_t{1} << 31;

std::vector<int64_t> negated(const std::vector<int64_t>& v) {
  std::vector<int64_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = -v[i];
  return out;
}

class BoundPad final : public BoundNode {
 public:
  BoundPad(std::vector<int64_t> pads, double value)
      : pads_(std::move(pads)),
        crop_(negated(pads_)),
        value_(value),
        // [C, H, W] padded on H and W only, by pads >= 0 (torch order: left, right, top,
        // bottom, then the channels'): a window then moves with the top/left pads and no
        // coefficient outside the output lands inside the input.
        spatial_(pads_.size() == 6 && pads_[4] == 0 && pads_[5] == 0 &&
                 std::all_of(pads_.begin(), pads_.end(), [](int64_t p) { return p >= 0; })) {}
  std::string op_type() const override { return "Pad"; }
  OpTraits traits() const override { return {.affine = true, .patches = spatial_}; }

  // Patches on the output keep their coefficients: the window's anchor moves by the top/left
  // pads, and its positions on the padding fall outside the input node. A nonzero value adds
  // Σ A·value over the padded positions of each row's window (masked to the output).
  std::vector<PatchesA> backward_patches(const PatchesA& a,
                                         std::span<const Interval* const> /*bounds*/,
                                         BiasPair& bias) const override {
    PatchesA res = a;
    res.padding[0] += pads_[2];
    res.padding[1] += pads_[0];
    if (value_ != 0) {
      const at::TensorOptions options = a.any().options();
      // [R, 1, C, kh, kw]: value at the padded positions of each window, 0 elsewhere.
      const at::Tensor constant =
          unfold_windows(at::constant_pad_nd(at::zeros(input_shape(0), options), pads_, value_), a);
      if (a.lA.defined() && a.lA.is_same(a.uA)) {
        const at::Tensor term = window_dot(a.lA, constant);  // [R, B]
        accumulate(bias.lower, term);
        accumulate(bias.upper, term);
      } else {
        if (a.lA.defined()) accumulate(bias.lower, window_dot(a.lA, constant));
        if (a.uA.defined()) accumulate(bias.upper, window_dot(a.uA, constant));
      }
    }
    return {res};
  }

  at::Tensor forward(std::span<const at::Tensor> x) const override {
    TORCH_CHECK(2 * (x[0].dim() - 1) >= int64_t(pads_.size()), "Pad has ", pads_.size(),
                " pads for a ", x[0].dim(), "-D input");
    return at::constant_pad_nd(x[0], pads_, value_);
  }
  // Exact per element: each output is an input element or the constant.
  Interval ibp(std::span<const Interval* const> x) const override {
    return {at::constant_pad_nd(x[0]->lower, pads_, value_),
            at::constant_pad_nd(x[0]->upper, pads_, value_)};
  }
  // A [S, B, *out] -> [S, B, *in]: the adjoint of padding is cropping (and of cropping, padding
  // with zeros): the same pads negated. The constant adds Σ A·value over the padded positions.
  std::vector<BoundA> backward(const BoundA& a, std::span<const Interval* const> /*bounds*/,
                               BiasPair& bias) const override {
    return {map_sides(
        a, bias, [&](const at::Tensor& A) { return at::constant_pad_nd(A, crop_, 0); },
        [&](const at::Tensor& A) {
          if (value_ == 0) return at::Tensor();
          // [1, *out]: value at the padded positions, 0 where x lands.
          const at::Tensor constant =
              at::constant_pad_nd(at::zeros(input_shape(0), A.options()), pads_, value_);
          return contract(A, constant);
        })};
  }

 private:
  std::vector<int64_t> pads_;
  std::vector<int64_t> crop_;
  double value_;
  bool spatial_;
};

std::vector<int64_t> ints_of(const LoweringContext& ctx, size_t i, const char* what) {
  const at::Tensor& t = ctx.constant(i);
  if (t.is_floating_point() || t.dim() > 1)
    ctx.fail(std::string(what) + " must be a 1-D integer tensor");
  const at::Tensor l = t.to(at::kLong).contiguous();
  return {l.data_ptr<int64_t>(), l.data_ptr<int64_t>() + l.numel()};
}

// Pad: pads and value from attributes (opsets 2-10) or from the inputs `pads`, `constant_value`
// and `axes` (opset 11 on; axes from 18).
Value lower_pad(LoweringContext& ctx, bool from_inputs) {
  if (!ctx.has_input(0)) ctx.fail("missing input 0");
  const Value& x = ctx.inputs[0];
  const std::vector<int64_t> in =
      x.is_constant() ? std::vector<int64_t>(x.constant.sizes().begin(), x.constant.sizes().end())
                      : ctx.builder.shape(x.node);
  const auto rank = int64_t(in.size());
  const std::string mode = ctx.attrs.get_string("mode", "constant");
  if (mode != "constant") ctx.unsupported("Pad mode=" + mode + " (only constant)");
  std::vector<int64_t> pads;
  double value = 0;
  std::vector<int64_t> axes(static_cast<size_t>(rank));
  for (int64_t d = 0; d < rank; ++d) axes[size_t(d)] = d;
  if (from_inputs) {
    pads = ints_of(ctx, 1, "pads");
    if (ctx.has_input(2)) {
      const at::Tensor v = ctx.constant(2).to(ctx.param_dtype);
      if (v.numel() != 1) ctx.fail("constant_value must be a scalar");
      value = v.item<double>();
    }
    if (ctx.has_input(3)) {
      axes = ints_of(ctx, 3, "axes");
      std::vector<bool> seen(size_t(rank), false);
      for (int64_t& a : axes) {
        if (a < -rank || a >= rank) ctx.fail("axis " + std::to_string(a) + " out of range");
        if (a < 0) a += rank;
        if (seen[size_t(a)]) ctx.fail("axis " + std::to_string(a) + " repeated");
        seen[size_t(a)] = true;
      }
    }
  } else {
    if (!ctx.attrs.int_lists.count("pads")) ctx.fail("missing attribute pads");
    pads = ctx.attrs.get_ints("pads", {});
    value = double(float(ctx.attrs.get_float("value", 0.0)));
  }
  if (!std::isfinite(value)) ctx.fail("the pad value is NaN or infinite");
  if (pads.size() != 2 * axes.size()) {
    ctx.fail(std::to_string(pads.size()) + " pads for " + std::to_string(axes.size()) + " axes");
  }
  // Per dim of the input: begin and end (ONNX: all begins, then all ends, in axes order).
  std::vector<int64_t> begin(size_t(rank), 0);
  std::vector<int64_t> end(size_t(rank), 0);
  for (size_t k = 0; k < axes.size(); ++k) {
    for (int64_t p : {pads[k], pads[k + axes.size()]}) {
      if (p < -kMaxPad || p > kMaxPad) ctx.fail("pad " + std::to_string(p) + " out of range");
    }
    begin[size_t(axes[k])] = pads[k];
    end[size_t(axes[k])] = pads[k + axes.size()];
  }
  int64_t numel = 1;
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t size = in[size_t(d)] + begin[size_t(d)] + end[size_t(d)];
    if (size < 1) ctx.fail("the pads leave dimension " + std::to_string(d) + " empty");
    if (numel > kMaxElements / size) ctx.unsupported("a padded tensor of more than 2^31 elements");
    numel *= size;
  }
  // at::constant_pad_nd's order: the last dim first, down to `first`.
  const auto torch_pads = [&](int64_t first) {
    std::vector<int64_t> p;
    for (int64_t d = rank - 1; d >= first; --d) {
      p.push_back(begin[size_t(d)]);
      p.push_back(end[size_t(d)]);
    }
    return p;
  };
  if (ctx.all_constant()) {
    return Value::of_constant(at::constant_pad_nd(ctx.constant(0), torch_pads(0), value));
  }
  if (begin[0] != 0 || end[0] != 0) ctx.unsupported("Pad of the batch dimension");
  return ctx.emit(make_pad(torch_pads(1), value), {ctx.bounded(0)});
}

}  // namespace

NodePtr make_pad(std::vector<int64_t> pads, double value) {
  return std::make_unique<BoundPad>(std::move(pads), value);
}

void register_pad(OpRegistry& r) {
  r.add("Pad", {.first = 2, .last = 10},
        [](LoweringContext& ctx) { return lower_pad(ctx, false); });
  r.add("Pad", {.first = 11}, [](LoweringContext& ctx) { return lower_pad(ctx, true); });
}

}  // namespace distcrown::ops
