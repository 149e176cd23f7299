// Concat and Split: of constants (folded at import) and of bounded tensors along a non-batch axis.
// Concat may mix bounded tensors and constants (a ViT's class token before its patch tokens):
// BoundConcat. Split of a bounded tensor is one Slice per output (ops/slice.hpp).
#include "ops/concat.hpp"

#include <algorithm>

#include <ATen/ATen.h>

#include "graph/op_registry.hpp"
#include "ops/axes.hpp"
#include "ops/slice.hpp"

namespace distcrown::ops {
namespace {

class BoundConcat final : public BoundNode {
 public:
  BoundConcat(int64_t axis, std::vector<ConcatPart> parts)
      : axis_(axis), parts_(std::move(parts)) {}
  std::string op_type() const override { return "Concat"; }
  OpTraits traits() const override {
    // Affine in the one bounded input when there is one (the finalize() notion of "affine");
    // several bounded parts are the joint case, like Add.
    int64_t bounded = 0;
    for (const ConcatPart& p : parts_) bounded += p.constant ? 0 : 1;
    return {.affine = bounded == 1};
  }
  std::vector<ParamPtr*> params() override {
    std::vector<ParamPtr*> out;
    for (ConcatPart& p : parts_) {
      if (p.constant) out.push_back(&p.constant);
    }
    return out;
  }

  at::Tensor forward(std::span<const at::Tensor> x) const override {
    return cat(x.front(), [&](size_t k) { return x[k]; });
  }
  Interval ibp(std::span<const Interval* const> x) const override {
    return {cat(x.front()->lower, [&](size_t k) { return x[k]->lower; }),
            cat(x.front()->upper, [&](size_t k) { return x[k]->upper; })};
  }
  std::vector<BoundA> backward(const BoundA& a, std::span<const Interval* const> /*bounds*/,
                               BiasPair& bias) const override {
    // A [S, B, *out] split along the axis (dim axis + 1 of A) into the parts' pieces.
    std::vector<BoundA> out;
    int64_t offset = 0;
    for (const ConcatPart& p : parts_) {
      const auto piece = [&](const at::Tensor& A) {
        return A.narrow(axis_ + 1, offset, p.length).contiguous();
      };
      if (p.constant) {
        const at::Tensor c = p.constant->get();
        (void)map_sides(
            a, bias, [](const at::Tensor& /*A*/) { return at::Tensor(); },
            [&](const at::Tensor& A) { return contract(piece(A), c); });
      } else {
        out.push_back(map_sides(a, bias, piece, no_bias));
      }
      offset += p.length;
    }
    return out;
  }

 private:
  // cat of the parts, bounded part k taken from part(k), constants broadcast over like's batch.
  template <class Part>
  at::Tensor cat(const at::Tensor& like, Part&& part) const {
    std::vector<at::Tensor> pieces;
    size_t k = 0;
    for (const ConcatPart& p : parts_) {
      if (p.constant) {
        const at::Tensor c = p.constant->get().to(like.scalar_type());
        pieces.push_back(c.unsqueeze(0).expand(with_batch(like.size(0), c.sizes().vec())));
      } else {
        pieces.push_back(part(k++));
      }
    }
    return at::cat(pieces, axis_);
  }

  int64_t axis_;
  std::vector<ConcatPart> parts_;
};

Value lower_concat(LoweringContext& ctx) {
  if (ctx.inputs.empty()) ctx.fail("expects at least one input");
  const auto rank = int64_t(sizes_of(ctx, 0).size());
  const int64_t axis = normalised_axis(ctx, ctx.attrs.get_int("axis", 0), rank);
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    if (int64_t(sizes_of(ctx, i).size()) != rank) ctx.fail("inputs of different ranks");
  }
  if (ctx.all_constant()) {
    std::vector<at::Tensor> parts;
    for (size_t i = 0; i < ctx.inputs.size(); ++i) parts.push_back(ctx.constant(i));
    return Value::of_constant(at::cat(parts, axis));
  }
  if (axis == 0) ctx.unsupported("Concat along the batch dimension");
  std::vector<ConcatPart> parts;
  std::vector<int> from;
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    const std::vector<int64_t> s = sizes_of(ctx, i);
    if (ctx.inputs[i].is_bounded()) {
      parts.push_back({s[size_t(axis)], nullptr});
      from.push_back(ctx.inputs[i].node);
      continue;
    }
    // A constant's dim 0 meets the batch dim (1): it is broadcast over the batch.
    if (s[0] != 1) ctx.fail("input " + std::to_string(i) + " has dim 0 of " + std::to_string(s[0]));
    if (s[size_t(axis)] == 0) continue;
    const at::Tensor& c = ctx.constant(i);
    parts.push_back({s[size_t(axis)], ctx.param(c.reshape(c.sizes().slice(1)))});
  }
  return ctx.emit(make_concat(axis, std::move(parts)), std::move(from));
}

enum class SplitForm {
  kAttribute,     // opsets 1-12: the `split` attribute
  kInput,         // opsets 13-17: the `split` input
  kInputOrCount,  // opsets 18+: the `split` input or the `num_outputs` attribute
};

Value lower_split(LoweringContext& ctx, SplitForm form) {
  const std::vector<int64_t> in = sizes_of(ctx, 0);
  const int64_t axis = normalised_axis(ctx, ctx.attrs.get_int("axis", 0), int64_t(in.size()));
  const int64_t n = in[size_t(axis)];
  const auto outputs = int64_t(ctx.output_count);
  std::vector<int64_t> lengths;
  if (form != SplitForm::kAttribute && ctx.has_input(1)) {
    lengths = int_values(ctx, 1);
  } else if (form == SplitForm::kAttribute && ctx.attrs.int_lists.count("split")) {
    lengths = ctx.attrs.get_ints("split", {});
  } else if (form == SplitForm::kInputOrCount) {
    const int64_t count = ctx.attrs.get_int("num_outputs", 0);
    if (count != outputs) ctx.fail("num_outputs must equal the number of outputs");
    const int64_t chunk = (n + count - 1) / count;  // the last part may be smaller
    for (int64_t i = 0; i < count; ++i)
      lengths.push_back(std::clamp(n - i * chunk, int64_t{0}, chunk));
  } else {
    if (n % outputs != 0) ctx.fail("the axis does not split into equal parts");
    lengths.assign(size_t(outputs), n / outputs);
  }
  if (int64_t(lengths.size()) != outputs) ctx.fail("split has a length per output");
  int64_t total = 0;
  for (const int64_t len : lengths) {
    if (len < 0) ctx.fail("a negative split length");
    total += len;
  }
  if (total != n) ctx.fail("split lengths do not add up to the axis");
  const bool bounded = !ctx.all_constant();
  if (bounded && axis == 0) ctx.unsupported("Split along the batch dimension");
  std::vector<Value> parts;
  int64_t offset = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    const int64_t len = lengths[i];
    if (!bounded) {
      parts.push_back(Value::of_constant(ctx.constant(0).narrow(axis, offset, len).contiguous()));
    } else if (len == n) {
      parts.push_back(ctx.inputs[0]);
    } else {
      if (len == 0) ctx.unsupported("Split with an empty output");
      std::string suffix;  // node names: the ONNX node's, then name/1, name/2, ...
      if (i > 0) suffix.append("/").append(std::to_string(i));
      parts.push_back(
          ctx.emit(make_slice({{axis, offset, offset + len, 1}}), {ctx.bounded(0)}, suffix));
    }
    offset += len;
  }
  ctx.extra_outputs.assign(parts.begin() + 1, parts.end());
  return parts.front();
}

}  // namespace

NodePtr make_concat(int64_t axis, std::vector<ConcatPart> parts) {
  return std::make_unique<BoundConcat>(axis, std::move(parts));
}

void register_concat(OpRegistry& r) {
  r.add("Concat", kAllOpsets, lower_concat);
  r.add("Split", {.first = 1, .last = 12},
        [](LoweringContext& c) { return lower_split(c, SplitForm::kAttribute); });
  r.add("Split", {.first = 13, .last = 17},
        [](LoweringContext& c) { return lower_split(c, SplitForm::kInput); });
  r.add("Split", {.first = 18},
        [](LoweringContext& c) { return lower_split(c, SplitForm::kInputOrCount); });
}

}  // namespace distcrown::ops
