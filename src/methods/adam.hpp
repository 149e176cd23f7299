#pragma once
// Adam (Kingma & Ba; PyTorch's defaults β = (0.9, 0.999), ε = 1e-8) over a list of leaf tensors,
// with a per-step learning rate: the α/β optimisers of α-CROWN and β-CROWN. Ascent or descent is
// the caller's choice of loss sign. Parameters without a gradient in a step are left alone.
#include <vector>

#include <ATen/core/Tensor.h>

namespace distcrown {

class Adam {
 public:
  explicit Adam(double lr, double beta1 = 0.9, double beta2 = 0.999, double eps = 1e-8)
      : lr_(lr), beta1_(beta1), beta2_(beta2), eps_(eps) {}

  /// One update of `params` (same list, same order every step) from their .grad(); clears the
  /// gradients.
  void step(const std::vector<at::Tensor>& params);

  /// Keeps only the entries `index` (long) along `dim` of every parameter's moments, for a
  /// caller that narrows its parameters the same way (branch and bound dropping the domains
  /// already proved from an optimisation in progress).
  void select(int64_t dim, const at::Tensor& index);

  void decay(double factor) { lr_ *= factor; }
  [[nodiscard]] double lr() const { return lr_; }

 private:
  double lr_, beta1_, beta2_, eps_;
  std::vector<int64_t> steps_;     // per parameter, like torch.optim.Adam's state["step"]
  std::vector<at::Tensor> m_, v_;  // first/second moments, shaped like each parameter
};

}  // namespace distcrown
