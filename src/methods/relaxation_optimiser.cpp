#include "methods/relaxation_optimiser.hpp"

#include <utility>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

namespace distcrown {

size_t RelaxationOptimiser::add_group(double lr, Projection projection,
                                      std::vector<at::Tensor> params) {
  groups_.push_back(Group{Adam(lr), projection, std::move(params)});
  return groups_.size() - 1;
}

void RelaxationOptimiser::set_params(size_t group, std::vector<at::Tensor> params) {
  groups_.at(group).params = std::move(params);
}

void RelaxationOptimiser::step(const at::Tensor& loss) {
  loss.backward();
  for (Group& g : groups_) g.adam.step(g.params);
  c10::NoGradGuard no_grad;
  for (Group& g : groups_) {
    for (at::Tensor& p : g.params) {
      switch (g.projection) {
        case Projection::kNone:
          break;
        case Projection::kUnitInterval:
          p.clamp_(0.0, 1.0);
          break;
        case Projection::kNonNegative:
          p.clamp_min_(0.0);
          break;
      }
    }
  }
}

void RelaxationOptimiser::select(int64_t dim, const at::Tensor& index) {
  for (Group& g : groups_) g.adam.select(dim, index);
}

void RelaxationOptimiser::decay(double factor) {
  for (Group& g : groups_) g.adam.decay(factor);
}

}  // namespace distcrown
