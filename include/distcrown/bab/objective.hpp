#pragma once
// What branch and bound proves, in tensor form. One VNNLIB disjunct (a conjunction of K output
// constraints c_k·y ≤ rhs_k describing UNSAFE outputs) is impossible on a domain when some
// constraint is violated everywhere on it: max_k (lb(c_k·y) − rhs_k) > 0. That maximum is the
// domain's value; a domain is proved when its value is > 0. Several disjuncts may share one
// search (join_disjuncts): a domain is then proved when every one of them is impossible on it,
// and its value is the smallest of their values.
#include <vector>

#include <ATen/core/Tensor.h>

#include "distcrown/io/vnnlib.hpp"

namespace distcrown::bab {

struct Objective {
  at::Tensor C;    // [K, n_out] rows of the conjunction, in the graph's dtype
  at::Tensor rhs;  // [K], double: thresholds are compared exactly as written, never rounded
  /// [K] bool: the rows written as strict (c·y < rhs); a counterexample must satisfy them
  /// strictly. Undefined: none is.
  at::Tensor strict;
  /// Rows per disjunct, in order, when the objective joins several (they sum to K); empty: one
  /// conjunction of all K rows.
  std::vector<int64_t> disjunct_rows;
};

/// The disjunct as an Objective with C in `dtype`. A disjunct without constraints (every output
/// unsafe) has K = 0: nothing can prove it.
Objective make_objective(const io::OutputConjunction& d, int64_t num_outputs, at::ScalarType dtype);

/// The disjuncts as one objective: their rows one after the other, `disjunct_rows` their counts.
Objective join_disjuncts(const std::vector<Objective>& disjuncts);

/// Domain values from lower bounds of C·y ([batch, K]): max_k (lb_k − rhs_k) in double, [batch].
/// −inf when K = 0. Joined: the smallest of the disjuncts' values.
at::Tensor domain_values(const Objective& o, const at::Tensor& lower);

/// Which rows still matter per domain ([batch, K] of 0/1 in lower's dtype): joined, the rows of
/// the disjuncts not yet proved on the domain; otherwise every row.
at::Tensor open_rows(const Objective& o, const at::Tensor& lower);

/// Violation margins at concrete outputs y [N, n_out]: max_k (c_k·y − rhs_k), [N]; the disjunct
/// holds (a counterexample) where the margin is <= 0. A strict row that holds with equality
/// counts as the smallest positive margin (not held). Joined: the smallest disjunct margin (some
/// disjunct holds).
at::Tensor margins(const Objective& o, const at::Tensor& y);
/// The case's disjuncts joined over `num_outputs` outputs, in double: its margins are <= 0
/// exactly where some disjunct holds, every row as written.
Objective case_objective(const io::VnnlibCase& c, int64_t num_outputs);
/// Whether the outputs y (flat) violate the case: case_objective's margin <= 0 at y.
bool violates(const Objective& case_objective, const at::Tensor& y);
/// Whether x lies in some case's box and violates() it at y: the property's violation, checked as
/// written (x and y flat, declared order).
bool violated_at(const io::VnnlibProperty& property, const std::vector<double>& x,
                 const std::vector<double>& y);

}  // namespace distcrown::bab
