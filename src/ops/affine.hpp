#pragma once
// The shared shape of operators that are affine in their one bounded input with a weight W and an
// optional bias b (Linear, Conv, BatchNorm, the tensor-parallel pair): y = M_W(x) + b, where M_W is
// linear in x and in W. An operator gives three maps and gets forward, IBP (auto_LiRPA's
// centre/radius form), the CROWN backward step and its parameters (FSDP shards them):
//   apply(x, W, b)     forward map, x [batch, *in] -> [batch, *out]; b may be undefined
//   map_a(A, W)        the adjoint A·∂y/∂x: A [S, batch, *out] -> [S, batch, *in]
//   bias_term(A, b)    Σ over the output elements of A·b: A [S, batch, *out] -> [S, batch]
// IBP: centre M_W(mid) + b, radius M_|W|(rad), so apply() with |W| must be the map of |W|.
#include "distcrown/graph/bound_node.hpp"

namespace distcrown::ops {

class AffineOp : public BoundNode {
 public:
  /// `weight` required; `bias` may be null.
  AffineOp(ParamPtr weight, ParamPtr bias);

  [[nodiscard]] std::vector<ParamPtr*> params() override;
  [[nodiscard]] at::Tensor forward(std::span<const at::Tensor> x) const override;
  [[nodiscard]] Interval ibp(std::span<const Interval* const> x) const override;
  [[nodiscard]] std::vector<BoundA> backward(const BoundA& a,
                                             std::span<const Interval* const> bounds,
                                             BiasPair& bias) const override;

 protected:
  [[nodiscard]] virtual at::Tensor apply(const at::Tensor& x, const at::Tensor& w,
                                         const at::Tensor& b) const = 0;
  [[nodiscard]] virtual at::Tensor map_a(const at::Tensor& A, const at::Tensor& w) const = 0;
  [[nodiscard]] virtual at::Tensor bias_term(const at::Tensor& A, const at::Tensor& b) const = 0;

  /// IBP in centre/radius form, the bias added to the centre when `with_bias`.
  struct CentreRadius {
    at::Tensor centre;  // [batch, *out]
    at::Tensor radius;  // [batch, *out]
  };
  [[nodiscard]] CentreRadius centre_radius(const Interval& x, bool with_bias) const;

  /// The parameters for one use (gathered under FSDP; dropped by the caller after the use).
  [[nodiscard]] at::Tensor weight() const { return w_->get(); }
  [[nodiscard]] at::Tensor bias() const { return b_ ? b_->get() : at::Tensor(); }
  /// Elements of the weight, without gathering it.
  [[nodiscard]] int64_t weight_numel() const { return w_->numel(); }

 private:
  ParamPtr w_;
  ParamPtr b_;
};

}  // namespace distcrown::ops
