#include "methods/adam.hpp"

#include <cmath>
#include <utility>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

namespace distcrown {

void Adam::step(const std::vector<at::Tensor>& params) {
  c10::NoGradGuard no_grad;
  m_.resize(params.size());
  v_.resize(params.size());
  steps_.resize(params.size(), 0);
  for (size_t i = 0; i < params.size(); ++i) {
    const at::Tensor& p = params[i];
    at::Tensor& g = p.mutable_grad();
    if (!g.defined()) continue;
    const double step = double(++steps_[i]);
    const double bc1 = 1.0 - std::pow(beta1_, step);
    const double bc2 = 1.0 - std::pow(beta2_, step);
    if (!m_[i].defined()) {
      m_[i] = at::zeros_like(p);
      v_[i] = at::zeros_like(p);
    }
    m_[i].mul_(beta1_).add_(g, 1.0 - beta1_);
    v_[i].mul_(beta2_).addcmul_(g, g, 1.0 - beta2_);
    // The denominator sqrt(v / bc2) + eps in the gradient's storage, which is not needed any
    // more: no fifth parameter-sized tensor at the step (the same operations as before).
    at::Tensor denom = std::move(g);
    denom.copy_(v_[i]).div_(bc2).sqrt_().add_(eps_);
    p.addcdiv_(m_[i], denom, -lr_ / bc1);
  }
}

void Adam::select(int64_t dim, const at::Tensor& index) {
  for (auto* moments : {&m_, &v_}) {
    for (at::Tensor& t : *moments) {
      if (t.defined()) t = t.index_select(dim, index);
    }
  }
}

}  // namespace distcrown
