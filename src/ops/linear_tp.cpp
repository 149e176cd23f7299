#include "distcrown/ops/linear_tp.hpp"

#include <ATen/ATen.h>

#include "distcrown/ops/linear.hpp"
#include "distcrown/util/error.hpp"

namespace distcrown::ops {
namespace {

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

  std::vector<BoundA> backward(const BoundA& a, std::span<const Interval* const> /*bounds*/,
                               BiasPair& bias_acc) const override {
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
    group_->all_reduce(y, collective::ReduceOp::kSum);
    const at::Tensor b = bias();
    return b.defined() ? y + b : y;
  }

  Interval ibp(std::span<const Interval* const> x) const override {
    // Centre and radius are both partial sums: one AllReduce of [2, B, out].
    const CentreRadius cr = centre_radius(*x[0], false);
    at::Tensor both = at::stack({cr.centre, cr.radius});
    group_->all_reduce(both, collective::ReduceOp::kSum);
    const at::Tensor b = bias();
    const at::Tensor centre = b.defined() ? both[0] + b : both[0];
    return {centre - both[1], centre + both[1]};
  }

  std::vector<BoundA> backward(const BoundA& a, std::span<const Interval* const> bounds,
                               BiasPair& bias_acc) const override {
    // The bias term A·b is replicated; entering the zone the pass's bias becomes a partial sum
    // that the zone's Col AllReduces: rank 0 keeps it, the others restart from zero.
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
