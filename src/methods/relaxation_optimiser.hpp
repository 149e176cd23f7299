#pragma once
// The optimiser of relaxation parameters that α-CROWN and β-CROWN's branch and bound share: Adam
// over groups of leaf tensors (the relaxation parameters of any op, a ReLU's slopes or an
// S-shaped function's tangent points, and the split multipliers β), each group with its own
// learning rate and the projection that keeps it sound. One step: the loss's backward, each
// group's Adam step in the order the groups were added, then each group's projection.
// α-CROWN (methods/alpha_crown.cpp) has one group, projected where it is read (AlphaSlopes);
// a branch-and-bound round (bab/relu_bounding.cpp) has two: α in [0, 1], β >= 0.
#include <cstddef>
#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "methods/adam.hpp"

namespace distcrown {

class RelaxationOptimiser {
 public:
  /// Where a group's parameters are put back after each step.
  enum class Projection {
    kNone,          // projected by the hook that reads them (α-CROWN's AlphaSlopes)
    kUnitInterval,  // [0, 1]: ReLU lower slopes
    kNonNegative,   // [0, inf): Lagrangian multipliers of split constraints
  };

  /// Adds a group of parameters (leaf tensors that require grad); returns its index.
  size_t add_group(double lr, Projection projection, std::vector<at::Tensor> params = {});
  /// Replaces a group's parameters (same count and order from then on, or Adam's moments no
  /// longer match): a caller that creates them lazily, or narrows them with select().
  void set_params(size_t group, std::vector<at::Tensor> params);
  [[nodiscard]] const std::vector<at::Tensor>& params(size_t group) const {
    return groups_.at(group).params;
  }
  /// One step toward a smaller `loss` (a bound to be maximised enters negated).
  void step(const at::Tensor& loss);
  /// Keeps the entries `index` along `dim` of every group's Adam moments (the caller narrows its
  /// parameters the same way and passes them to set_params).
  void select(int64_t dim, const at::Tensor& index);
  /// Multiplies every group's learning rate by `factor`.
  void decay(double factor);

 private:
  struct Group {
    Adam adam;
    Projection projection;
    std::vector<at::Tensor> params;
  };
  std::vector<Group> groups_;
};

}  // namespace distcrown
