#pragma once
// What branch and bound proves, in tensor form. One VNNLIB disjunct (a conjunction of K output
// constraints c_k·y ≤ rhs_k describing UNSAFE outputs) is impossible on a domain when some
// constraint is violated everywhere on it: max_k (lb(c_k·y) − rhs_k) > 0. That maximum is the
// domain's value; a domain is proved when its value is > 0.
#include <vector>

#include <ATen/core/Tensor.h>

#include "distcrown/io/vnnlib.hpp"

namespace distcrown::bab {

struct Objective {
  at::Tensor C;    // [K, n_out] rows of the conjunction, in the graph's dtype
  at::Tensor rhs;  // [K], double: thresholds are compared exactly as written, never rounded
};

/// The disjunct as an Objective with C in `dtype`. A disjunct without constraints (every output
/// unsafe) has K = 0: nothing can prove it.
Objective make_objective(const io::OutputConjunction& d, int64_t num_outputs, at::ScalarType dtype);

/// Domain values from lower bounds of C·y ([batch, K]): max_k (lb_k − rhs_k) in double, [batch].
/// −inf when K = 0.
at::Tensor domain_values(const Objective& o, const at::Tensor& lower);

/// Violation margins at concrete outputs y [N, n_out]: max_k (c_k·y − rhs_k), [N]; the disjunct
/// holds (a counterexample) where the margin is <= 0.
at::Tensor margins(const Objective& o, const at::Tensor& y);

}  // namespace distcrown::bab
