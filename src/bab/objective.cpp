#include "distcrown/bab/objective.hpp"

#include <limits>

#include <ATen/ATen.h>

namespace distcrown::bab {

Objective make_objective(const io::OutputConjunction& d, int64_t num_outputs,
                         at::ScalarType dtype) {
  const auto K = int64_t(d.constraints.size());
  std::vector<double> c;
  std::vector<double> rhs;
  c.reserve(size_t(K * num_outputs));
  for (const auto& k : d.constraints) {
    c.insert(c.end(), k.coeffs.begin(), k.coeffs.end());
    rhs.push_back(k.rhs);
  }
  return {at::tensor(c, at::kDouble).reshape({K, num_outputs}).to(dtype),
          at::tensor(rhs, at::kDouble)};
}

at::Tensor domain_values(const Objective& o, const at::Tensor& lower) {
  if (o.rhs.numel() == 0) {
    return at::full({lower.size(0)}, -std::numeric_limits<double>::infinity(),
                    lower.options().dtype(at::kDouble));
  }
  const at::Tensor l = lower.to(at::kDouble);
  return (l - o.rhs.to(l.device())).amax(1);
}

at::Tensor margins(const Objective& o, const at::Tensor& y) {
  const int64_t N = y.size(0);
  if (o.rhs.numel() == 0) {
    return at::full({N}, -std::numeric_limits<double>::infinity(), y.options());
  }
  // In double: a counterexample must hold without float32 rounding of the products.
  const at::Tensor yd = y.reshape({N, -1}).to(at::kDouble);
  return (at::matmul(yd, o.C.to(yd.options()).t()) - o.rhs.to(yd.options())).amax(1);
}

}  // namespace distcrown::bab
