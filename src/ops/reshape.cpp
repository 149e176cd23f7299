#include "ops/reshape.hpp"

#include <algorithm>
#include <numeric>

#include <ATen/ATen.h>

#include "distcrown/util/error.hpp"
#include "graph/op_registry.hpp"
#include "ops/axes.hpp"

namespace distcrown::ops {
namespace {

// perm holds each of 0 .. rank-1 exactly once.
bool is_permutation_of_axes(const std::vector<int64_t>& perm, size_t rank) {
  if (perm.size() != rank) return false;
  std::vector<bool> seen(rank, false);
  for (int64_t p : perm) {
    if (p < 0 || p >= int64_t(rank) || seen[size_t(p)]) return false;
    seen[size_t(p)] = true;
  }
  return true;
}

std::vector<int64_t> with_lead(std::initializer_list<int64_t> lead,
                               const std::vector<int64_t>& rest) {
  std::vector<int64_t> s(lead);
  s.insert(s.end(), rest.begin(), rest.end());
  return s;
}

class BoundReshape final : public BoundNode {
 public:
  BoundReshape(std::vector<int64_t> shape, std::string op)
      : shape_(std::move(shape)), op_(std::move(op)) {}
  std::string op_type() const override { return op_; }
  OpTraits traits() const override { return {.affine = true}; }

  at::Tensor forward(std::span<const at::Tensor> x) const override {
    return x[0].reshape(with_lead({x[0].size(0)}, shape_));
  }
  Interval ibp(std::span<const Interval* const> x) const override {
    const auto s = with_lead({x[0]->lower.size(0)}, shape_);
    return {x[0]->lower.reshape(s), x[0]->upper.reshape(s)};
  }
  std::vector<BoundA> backward(const BoundA& a, std::span<const Interval* const> /*bounds*/,
                               BiasPair& bias) const override {
    const auto& in = input_shape(0);
    const std::vector<int64_t> rest(in.begin() + 1, in.end());
    return {map_sides(
        a, bias,
        [&](const at::Tensor& A) {
          return A.reshape(with_lead({A.size(0), A.size(1)}, rest));
        },
        no_bias)};
  }

 private:
  std::vector<int64_t> shape_;
  std::string op_;
};

// y = x broadcast to [batch, *shape] (ONNX's right-aligned broadcasting; x's rank at most the
// output's). Linear: the CROWN step sums A over the broadcast dims.
class BoundExpand final : public BoundNode {
 public:
  explicit BoundExpand(std::vector<int64_t> shape) : shape_(std::move(shape)) {}
  std::string op_type() const override { return "Expand"; }
  OpTraits traits() const override { return {.affine = true}; }

  at::Tensor forward(std::span<const at::Tensor> x) const override {
    return aligned(x[0]).expand(with_lead({x[0].size(0)}, shape_));
  }
  Interval ibp(std::span<const Interval* const> x) const override {
    const auto s = with_lead({x[0]->lower.size(0)}, shape_);
    return {aligned(x[0]->lower).expand(s), aligned(x[0]->upper).expand(s)};
  }
  std::vector<BoundA> backward(const BoundA& a, std::span<const Interval* const> /*bounds*/,
                               BiasPair& bias) const override {
    const auto& in = input_shape(0);
    const std::vector<int64_t> rest(in.begin() + 1, in.end());
    return {map_sides(
        a, bias,
        [&](const at::Tensor& A) {
          // [S, B, *shape] -> [S, B, 1.., *in] summed where x was broadcast -> [S, B, *in].
          std::vector<int64_t> padded{A.size(0), A.size(1)};
          padded.insert(padded.end(), shape_.size() - rest.size(), 1);
          padded.insert(padded.end(), rest.begin(), rest.end());
          return A.sum_to_size(padded).reshape(with_lead({A.size(0), A.size(1)}, rest));
        },
        no_bias)};
  }

 private:
  // x [B, *in] viewed as [B, 1.., *in] of the output's rank.
  [[nodiscard]] at::Tensor aligned(const at::Tensor& x) const {
    std::vector<int64_t> s{x.size(0)};
    s.insert(s.end(), shape_.size() + 1 - size_t(x.dim()), 1);
    s.insert(s.end(), x.sizes().begin() + 1, x.sizes().end());
    return x.reshape(s);
  }
  std::vector<int64_t> shape_;
};

class BoundTranspose final : public BoundNode {
 public:
  explicit BoundTranspose(std::vector<int64_t> perm) : perm_(std::move(perm)) {
    if (!is_permutation_of_axes(perm_, perm_.size())) {
      throw InvalidArgument("Transpose: perm is not a permutation of the axes");
    }
    inverse_.assign(perm_.size(), 0);
    for (size_t i = 0; i < perm_.size(); ++i) inverse_[size_t(perm_[i])] = int64_t(i);
  }
  std::string op_type() const override { return "Transpose"; }
  OpTraits traits() const override { return {.affine = true}; }
  at::Tensor forward(std::span<const at::Tensor> x) const override {
    TORCH_CHECK(x[0].dim() == int64_t(perm_.size()), "perm has ", perm_.size(), " entries for a ",
                x[0].dim(), "-D input");
    return x[0].permute(perm_);
  }
  Interval ibp(std::span<const Interval* const> x) const override {
    return {x[0]->lower.permute(perm_), x[0]->upper.permute(perm_)};
  }
  std::vector<BoundA> backward(const BoundA& a, std::span<const Interval* const> /*bounds*/,
                               BiasPair& bias) const override {
    // A [S, *out_dims] -> [S, *in_dims]: the inverse permutation, shifted past the spec dim.
    std::vector<int64_t> p{0};
    for (int64_t d : inverse_) p.push_back(d + 1);
    return {map_sides(
        a, bias, [&](const at::Tensor& A) { return A.permute(p); }, no_bias)};
  }

 private:
  std::vector<int64_t> perm_;
  std::vector<int64_t> inverse_;
};

// Emits a reshape of a bounded input, batched or not, to the ONNX shape `full`: batched when
// full[0] is 1 (the batch), else unbatched ([batch, *full]): each sample is reshaped alone.
Value emit_reshape(LoweringContext& ctx, const std::vector<int64_t>& full, const char* op) {
  const int x = ctx.bounded_unbatched(0);
  if (full.empty()) ctx.unsupported(std::string(op) + " of a variable tensor to a scalar");
  if (full[0] == 1) return ctx.emit(make_reshape({full.begin() + 1, full.end()}, op), {x});
  return Value::of_unbatched_node(ctx.emit(make_reshape(full, op), {x}).node);
}

Value lower_flatten(LoweringContext& ctx) {
  const auto in = sizes_of(ctx, 0);
  int64_t axis = ctx.attrs.get_int("axis", 1);
  if (axis < 0) axis += int64_t(in.size());
  if (axis < 0 || axis > int64_t(in.size())) ctx.fail("axis out of range");
  const int64_t outer =
      std::accumulate(in.begin(), in.begin() + axis, int64_t{1}, std::multiplies<>());
  const int64_t inner =
      std::accumulate(in.begin() + axis, in.end(), int64_t{1}, std::multiplies<>());
  if (ctx.all_constant()) return Value::of_constant(ctx.constant(0).reshape({outer, inner}));
  return emit_reshape(ctx, {outer, inner}, "Flatten");
}

Value lower_reshape(LoweringContext& ctx) {
  const auto in = sizes_of(ctx, 0);
  const at::Tensor spec = ctx.constant(1).to(at::kLong).contiguous();
  if (ctx.attrs.get_int("allowzero", 0) != 0) ctx.unsupported("Reshape with allowzero=1");
  std::vector<int64_t> full(spec.data_ptr<int64_t>(), spec.data_ptr<int64_t>() + spec.numel());
  for (size_t i = 0; i < full.size(); ++i) {
    if (full[i] == 0) {
      if (i >= in.size()) ctx.fail("shape entry 0 at an axis the input does not have");
      full[i] = in[i];
    }
  }
  const int64_t total = std::accumulate(in.begin(), in.end(), int64_t{1}, std::multiplies<>());
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < full.size(); ++i) {
    if (full[i] == -1) {
      if (infer >= 0) ctx.fail("more than one -1 in the target shape");
      infer = int(i);
    } else if (full[i] < 0) {
      ctx.fail("negative entry in the target shape");
    } else {
      known *= full[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || total % known != 0) ctx.fail("target shape does not fit the input");
    full[size_t(infer)] = total / known;
  }
  if (std::accumulate(full.begin(), full.end(), int64_t{1}, std::multiplies<>()) != total) {
    ctx.fail("target shape has a different number of elements than the input");
  }
  if (ctx.all_constant()) return Value::of_constant(ctx.constant(0).reshape(full));
  return emit_reshape(ctx, full, "Reshape");
}

Value lower_transpose(LoweringContext& ctx) {
  const auto in = sizes_of(ctx, 0);
  std::vector<int64_t> perm(in.size());
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = int64_t(perm.size() - 1 - i);
  perm = ctx.attrs.get_ints("perm", perm);
  if (!is_permutation_of_axes(perm, in.size())) {
    ctx.fail("perm must be a permutation of 0.." + std::to_string(int64_t(in.size()) - 1));
  }
  if (ctx.all_constant()) return Value::of_constant(ctx.constant(0).permute(perm).contiguous());
  if (!perm.empty() && perm[0] == 0 && !ctx.inputs[0].unbatched) {
    return ctx.emit(make_transpose(perm), {ctx.bounded(0)});
  }
  // ONNX dim 0 moves (or there is no batch dim): permute the dims after the batch.
  std::vector<int64_t> internal{0};
  std::vector<int64_t> out;
  for (const int64_t p : perm) {
    internal.push_back(p + 1);
    out.push_back(in[size_t(p)]);
  }
  const int x = unbatched_view(ctx, 0);
  return as_onnx_shaped(ctx, ctx.emit(make_transpose(internal), {x}).node, out);
}

Value lower_shape(LoweringContext& ctx) {
  // Static shapes (batch 1): Shape is always a constant, of a bounded tensor too. Opset 15's start
  // and end pick a range of the dims (negative: from the end; clamped to the rank).
  if (ctx.inputs.at(0).is_bounded()) (void)ctx.bounded_unbatched(0);
  const auto in = sizes_of(ctx, 0);
  const auto rank = int64_t(in.size());
  const auto clampi = [rank](int64_t v) {
    return std::clamp(v < 0 ? v + rank : v, int64_t{0}, rank);
  };
  const int64_t start = clampi(ctx.attrs.get_int("start", 0));
  const int64_t end = std::max(start, clampi(ctx.attrs.get_int("end", rank)));
  return Value::of_constant(
      at::tensor(std::vector<int64_t>(in.begin() + start, in.begin() + end), at::kLong));
}

// Unsqueeze / Squeeze: axes an attribute before opset 13, an input from 13 on (`axes_input`).
Value lower_unsqueeze_squeeze(LoweringContext& ctx, bool unsqueeze, bool axes_input) {
  std::vector<int64_t> axes;
  if (axes_input) {
    if (ctx.has_input(1)) {
      axes = int_values(ctx, 1);
    } else if (unsqueeze) {
      ctx.fail("Unsqueeze needs its axes input");
    }
  } else {
    if (ctx.has_input(1)) ctx.fail("axes is an attribute before opset 13, not an input");
    axes = ctx.attrs.get_ints("axes", {});
  }
  auto shape = sizes_of(ctx, 0);
  // Unsqueeze names axes of its output, Squeeze of its input; each once, within the rank.
  const auto rank = int64_t(shape.size() + (unsqueeze ? axes.size() : 0));
  if (!unsqueeze && axes.empty()) {
    for (int64_t i = 0; i < rank; ++i) {
      if (shape[size_t(i)] == 1) axes.push_back(i);
    }
  }
  for (auto& a : axes) {
    if (a < -rank || a >= rank) {
      ctx.fail("axis " + std::to_string(a) + " is outside a rank-" + std::to_string(rank) +
               " tensor");
    }
    a = a < 0 ? a + rank : a;
  }
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) ctx.fail("an axis is repeated");
  if (unsqueeze) {
    for (int64_t a : axes) shape.insert(shape.begin() + a, 1);
  } else {
    for (auto it = axes.rbegin(); it != axes.rend(); ++it) {
      if (shape[size_t(*it)] != 1) ctx.fail("Squeeze of a dimension that is not 1");
      shape.erase(shape.begin() + *it);
    }
  }
  if (ctx.all_constant()) return Value::of_constant(ctx.constant(0).reshape(shape));
  return emit_reshape(ctx, shape, unsqueeze ? "Unsqueeze" : "Squeeze");
}

}  // namespace

int broadcast_to_constant(LoweringContext& ctx, int x, const at::Tensor& c) {
  return broadcast_to_shape(ctx, x, c.sizes().vec(), c.numel());
}

int broadcast_to_shape(LoweringContext& ctx, int x, const std::vector<int64_t>& shape,
                       int64_t held) {
  const std::vector<int64_t>& xs = ctx.builder.shape(x);  // [1, *in]
  const std::vector<int64_t> out = checked_broadcast(ctx, {xs, shape}, held);
  if (out == xs) return x;
  if (out.size() > xs.size() || out.front() != xs.front()) {
    ctx.unsupported("a constant that broadcasts the batch dimension of a variable input");
  }
  return ctx.emit(make_expand(std::vector<int64_t>(out.begin() + 1, out.end())), {x}, "/expand")
      .node;
}

NodePtr make_reshape(std::vector<int64_t> shape, std::string op_type) {
  return std::make_unique<BoundReshape>(std::move(shape), std::move(op_type));
}
NodePtr make_expand(std::vector<int64_t> shape) {
  return std::make_unique<BoundExpand>(std::move(shape));
}
NodePtr make_transpose(std::vector<int64_t> perm) {
  return std::make_unique<BoundTranspose>(std::move(perm));
}

void register_reshape(OpRegistry& r) {
  r.add("Flatten", kAllOpsets, lower_flatten);
  r.add("Reshape", {.first = 5}, lower_reshape);
  r.add("Transpose", kAllOpsets, lower_transpose);
  r.add("Shape", kAllOpsets, lower_shape);
  for (const bool unsqueeze : {true, false}) {
    const std::string op = unsqueeze ? "Unsqueeze" : "Squeeze";
    r.add(op, {.first = 1, .last = 12},
          [unsqueeze](LoweringContext& c) { return lower_unsqueeze_squeeze(c, unsqueeze, false); });
    r.add(op, {.first = 13},
          [unsqueeze](LoweringContext& c) { return lower_unsqueeze_squeeze(c, unsqueeze, true); });
  }
}

Value as_onnx_shaped(LoweringContext& ctx, int node, const std::vector<int64_t>& onnx_shape) {
  if (onnx_shape.size() < 2 || onnx_shape[0] != 1) return Value::of_unbatched_node(node);
  return ctx.emit(make_reshape({onnx_shape.begin() + 1, onnx_shape.end()}), {node}, "/batched");
}

int unbatched_view(LoweringContext& ctx, size_t i) {
  const int x = ctx.bounded_unbatched(i);
  if (ctx.inputs[i].unbatched) return x;
  return ctx.emit(make_reshape(ctx.builder.shape(x)), {x}, "/unbatched").node;
}

}  // namespace distcrown::ops
