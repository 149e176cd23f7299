#include "ops/linear_tp.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "distcrown/collective/autograd.hpp"

#include "distcrown/util/error.hpp"
#include "ops/linear.hpp"

namespace distcrown::ops {
namespace {

// α-CROWN differentiates through the zones (grad mode on, a pass carrying α): then the zone's
// collectives are the autograd pairs of collective/autograd.hpp (convention `whole`: every rank
// differentiates the whole loss), so a replicated tensor that enters this rank's share of the
// work goes through copy_to_shards and a partial sum leaves through reduce_from_shards. The
// plain Communicator calls below stay the CROWN path (no autograd record, bitwise unchanged).
// Every rank makes the same decision: their passes carry the same parameters.
bool differentiable(std::initializer_list<const at::Tensor*> ts) {
  if (!at::GradMode::is_enabled()) return false;
  for (const at::Tensor* t : ts) {
    if (t->defined() && t->requires_grad()) return true;
  }
  return false;
}

// Interval through copy_to_shards (a replicated input of this rank's local work).
Interval to_shards(const Interval& x, const collective::CommPtr& group) {
  return {collective::copy_to_shards(x.lower, group), collective::copy_to_shards(x.upper, group)};
}

// Forward and IBP are LinearMaps' (local: x [B, in] replicated -> this rank's neurons [B, w]).
class BoundLinearTPCol final : public LinearMaps {
 public:
  BoundLinearTPCol(ParamPtr w, ParamPtr b, OutputShard shard, collective::CommPtr group)
      : LinearMaps(std::move(w), std::move(b)), shard_(shard), group_(std::move(group)) {
    if (!group_) throw InvalidArgument("BoundLinearTPCol needs a communicator");
  }
  std::string op_type() const override { return "LinearTPCol"; }
  OpTraits traits() const override { return {.affine = true, .mixes_elements = true}; }
  const OutputShard* output_shard() const override { return &shard_; }

  // A replicated input -> this rank's neurons; differentiated (PGD's gradient through the
  // network), the input's gradient is this rank's share.
  at::Tensor forward(std::span<const at::Tensor> x) const override {
    if (!differentiable({&x[0]})) return LinearMaps::forward(x);
    const at::Tensor shared = collective::copy_to_shards(x[0], group_);
    return LinearMaps::forward(std::span<const at::Tensor>(&shared, 1));
  }

  // Replicated input bounds -> this rank's neurons: the input's gradient is this rank's share.
  Interval ibp(std::span<const Interval* const> x) const override {
    if (!differentiable({&x[0]->lower, &x[0]->upper})) return LinearMaps::ibp(x);
    const Interval shared = to_shards(*x[0], group_);
    const Interval* args[] = {&shared};
    return LinearMaps::ibp(args);
  }

  std::vector<BoundA> backward(const BoundA& a, std::span<const Interval* const> bounds,
                               BiasPair& bias_acc) const override {
    if (differentiable({&a.lA, &a.uA, &bias_acc.lower, &bias_acc.upper})) {
      return backward_differentiable(a, bounds, bias_acc);
    }
    // Each rank's A·W_r [S, B, in] and bias (the pass's partial bias + A·b_r, [S, B]) are its
    // share of the whole; they are written into one buffer and summed by one AllReduce:
    //   buffer = [A side 1 | A side 2 (when lA, uA differ) | bias lower | bias upper]
    const at::Tensor w = weight();  // [w, in]
    const at::Tensor b = bias();
    const bool shared = a.lA.defined() && a.lA.is_same(a.uA);
    const at::Tensor& any = a.lA.defined() ? a.lA : a.uA;
    const int64_t S = any.size(0);
    const int64_t B = any.size(1);
    const int64_t in = w.size(1);
    const int64_t a_numel = S * B * in;
    std::vector<const at::Tensor*> sides;  // distinct A tensors to map
    if (a.lA.defined()) sides.push_back(&a.lA);
    if (a.uA.defined() && !shared) sides.push_back(&a.uA);
    const bool lower = a.lA.defined();
    const bool upper = a.uA.defined();
    const int64_t n_bias = (lower ? 1 : 0) + (upper ? 1 : 0);
    at::Tensor buffer =
        at::empty({int64_t(sides.size()) * a_numel + n_bias * S * B}, any.options());
    int64_t at_offset = 0;
    std::vector<at::Tensor> mapped;
    for (const at::Tensor* A : sides) {
      at::Tensor view = buffer.narrow(0, at_offset, a_numel).view({S, B, in});
      if (in >= kRowIndependentMinColumns) {
        at::Tensor flat = view.view({S * B, in});
        at::mm_out(flat, A->reshape({S * B, -1}), w);
      } else {
        view.copy_(matmul_row_independent(*A, w));
      }
      mapped.push_back(view);
      at_offset += a_numel;
    }
    auto partial_bias = [&](const at::Tensor& acc, const at::Tensor& A) {
      at::Tensor slot = buffer.narrow(0, at_offset, S * B).view({S, B});
      at_offset += S * B;
      if (acc.defined()) {
        slot.copy_(acc);
      } else {
        slot.zero_();
      }
      if (b.defined()) slot.add_(contract(A, b));
      return slot;
    };
    at::Tensor lbias = lower ? partial_bias(bias_acc.lower, a.lA) : at::Tensor();
    at::Tensor ubias = upper ? partial_bias(bias_acc.upper, a.uA) : at::Tensor();
    group_->all_reduce(buffer, collective::ReduceOp::kSum);
    // The biases are copied out so the A buffer is freed once the A matrices are consumed.
    bias_acc.lower = lower ? lbias.clone() : at::Tensor();
    bias_acc.upper = upper ? ubias.clone() : at::Tensor();
    BoundA out;
    size_t next = 0;
    if (lower) out.lA = mapped[next++];
    if (upper) out.uA = shared ? out.lA : mapped[next++];
    return {out};
  }

 private:
  // backward() with autograd: A·W_r and the partial biases (LinearMaps' map), then one
  // reduce_from_shards over all of them: [A sides | bias lower | bias upper] flattened.
  std::vector<BoundA> backward_differentiable(const BoundA& a,
                                              std::span<const Interval* const> bounds,
                                              BiasPair& bias_acc) const {
    const at::Tensor& any = a.lA.defined() ? a.lA : a.uA;
    const int64_t S = any.size(0);
    const int64_t B = any.size(1);
    BiasPair partial;  // this rank's share of the pass's bias: [S, B] per defined side
    if (a.lA.defined())
      partial.lower = bias_acc.lower.defined() ? bias_acc.lower : at::zeros({S, B}, any.options());
    if (a.uA.defined())
      partial.upper = bias_acc.upper.defined() ? bias_acc.upper : at::zeros({S, B}, any.options());
    const BoundA mapped = LinearMaps::backward(a, bounds, partial).front();
    const bool shared = mapped.lA.defined() && mapped.lA.is_same(mapped.uA);
    std::vector<at::Tensor> parts;
    if (mapped.lA.defined()) parts.push_back(mapped.lA.reshape({-1}));
    if (mapped.uA.defined() && !shared) parts.push_back(mapped.uA.reshape({-1}));
    if (partial.lower.defined()) parts.push_back(partial.lower.reshape({-1}));
    if (partial.upper.defined()) parts.push_back(partial.upper.reshape({-1}));
    const at::Tensor whole = collective::reduce_from_shards(at::cat(parts), group_);
    int64_t at_offset = 0;
    const auto take = [&](const at::Tensor& like) {
      at::Tensor t = whole.narrow(0, at_offset, like.numel()).view(like.sizes());
      at_offset += like.numel();
      return t;
    };
    BoundA out;
    if (mapped.lA.defined()) out.lA = take(mapped.lA);
    if (mapped.uA.defined()) out.uA = shared ? out.lA : take(mapped.uA);
    bias_acc.lower = partial.lower.defined() ? take(partial.lower) : at::Tensor();
    bias_acc.upper = partial.upper.defined() ? take(partial.upper) : at::Tensor();
    return {out};
  }

  OutputShard shard_;  // this rank's rows of W [w, in] and b [w] (params())
  collective::CommPtr group_;
};

// Backward is LinearMaps' (local: A [S, B, out] replicated -> A·W_r [S, B, w], this rank's slice)
// followed by the bias hand-over below.
class BoundLinearTPRow final : public LinearMaps {
 public:
  BoundLinearTPRow(ParamPtr w, ParamPtr b, collective::CommPtr group)
      : LinearMaps(std::move(w), std::move(b)), group_(std::move(group)) {
    if (!group_) throw InvalidArgument("BoundLinearTPRow needs a communicator");
  }
  std::string op_type() const override { return "LinearTPRow"; }
  OpTraits traits() const override { return {.affine = true, .mixes_elements = true}; }

  // x [B, w] (this rank's slice) -> x·W_rᵀ, a partial sum over ranks; AllReduce, then + b.
  at::Tensor forward(std::span<const at::Tensor> x) const override {
    at::Tensor y = apply(x[0], weight().to(x[0].scalar_type()), at::Tensor()).contiguous();
    if (differentiable({&y})) {
      y = collective::reduce_from_shards(y, group_);
    } else {
      group_->all_reduce(y, collective::ReduceOp::kSum);
    }
    const at::Tensor b = bias();
    return b.defined() ? y + b : y;
  }

  Interval ibp(std::span<const Interval* const> x) const override {
    // Centre and radius are both partial sums: one AllReduce of [2, B, out].
    const CentreRadius cr = centre_radius(*x[0], false);
    at::Tensor both = at::stack({cr.centre, cr.radius});
    if (differentiable({&both})) {
      both = collective::reduce_from_shards(both, group_);
    } else {
      group_->all_reduce(both, collective::ReduceOp::kSum);
    }
    const at::Tensor b = bias();
    const at::Tensor centre = b.defined() ? both[0] + b : both[0];
    return {centre - both[1], centre + both[1]};
  }

  std::vector<BoundA> backward(const BoundA& a, std::span<const Interval* const> bounds,
                               BiasPair& bias_acc) const override {
    // The bias term A·b is replicated; entering the zone the pass's bias becomes a partial sum
    // that the zone's Col AllReduces: rank 0 keeps it, the others restart from zero.
    if (differentiable({&a.lA, &a.uA, &bias_acc.lower, &bias_acc.upper})) {
      // A·b on the replicated A (replicated work), the A through copy_to_shards into this
      // rank's columns; the hand-over keeps every rank's graph the same (×0 instead of dropping)
      // and copy_to_shards sums rank 0's gradient to every rank.
      const at::Tensor w = weight();
      const at::Tensor b = bias();
      map_sides(a, bias_acc, no_bias,
                [&](const at::Tensor& A) { return b.defined() ? bias_term(A, b) : at::Tensor(); });
      BoundA local;
      local.lA = a.lA.defined() ? collective::copy_to_shards(a.lA, group_) : at::Tensor();
      local.uA = a.uA.defined() && a.uA.is_same(a.lA) ? local.lA
                 : a.uA.defined()                     ? collective::copy_to_shards(a.uA, group_)
                                                      : at::Tensor();
      BiasPair none;
      std::vector<BoundA> out{map_sides(
          local, none, [&](const at::Tensor& A) { return map_a(A, w); }, no_bias)};
      const double keep = group_->rank() == 0 ? 1.0 : 0.0;
      for (at::Tensor* side : {&bias_acc.lower, &bias_acc.upper}) {
        if (side->defined()) *side = collective::copy_to_shards(*side, group_) * keep;
      }
      return out;
    }
    std::vector<BoundA> out = LinearMaps::backward(a, bounds, bias_acc);
    if (group_->rank() != 0) bias_acc = BiasPair{};
    return out;
  }

 private:
  collective::CommPtr group_;  // W [out, w]: this rank's columns; b [out] whole (params())
};

}  // namespace

NodePtr make_linear_tp_col(ParamPtr weight, ParamPtr bias, OutputShard shard,
                           collective::CommPtr group) {
  return std::make_unique<BoundLinearTPCol>(std::move(weight), std::move(bias), shard,
                                            std::move(group));
}

NodePtr make_linear_tp_row(ParamPtr weight, ParamPtr bias, collective::CommPtr comm) {
  return std::make_unique<BoundLinearTPRow>(std::move(weight), std::move(bias), std::move(comm));
}

}  // namespace distcrown::ops
