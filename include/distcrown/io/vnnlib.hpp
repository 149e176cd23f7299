#pragma once
// VNNLIB property parser (the VNN-COMP property format).
//
// Format: a subset of SMT-LIB 2. A file declares real-valued input variables X_0..X_{n-1} and
// output variables Y_0..Y_{m-1} with `(declare-const X_<i> Real)`, then states `(assert F)`
// formulas. Comments run from `;` to the end of the line. Formulas are built from `and`, `or`
// and comparisons `<=`, `>=`, `<`, `>` (and `=`) between linear terms: numbers, variables,
// `(+ t...)`, `(- t)`, `(- t1 t2...)`, `(* c t)`. Strict and non-strict comparisons are treated
// alike (they describe the same sets up to their boundary, which does not matter for bounds).
//
// Semantics (as VNN-COMP's vnnlib.py): the conjunction of all asserts describes the UNSAFE set.
// The parser converts it to disjunctive normal form. In every DNF term, comparisons over X alone
// must be bounds on a single X_i; they define an input box. Comparisons over Y alone become
// linear constraints `coeffs . Y <= rhs`. Terms with equal boxes are grouped into one
// VnnlibCase whose disjuncts are those terms' output conjunctions. The property is violated iff,
// for some case, some x in its box gives y = f(x) satisfying one of its disjuncts.
//
// Errors: malformed or unsupported text throws distcrown::ParseError with a message
// "FILE:LINE:COL: ..." (1-based); an unreadable file throws distcrown::Error naming the path.
#include <cstdint>
#include <string>
#include <vector>

namespace distcrown::io {

/// sum_j coeffs[j] * Y_j <= rhs, with coeffs.size() == num_outputs.
struct LinearConstraint {
  std::vector<double> coeffs;
  double rhs = 0.0;
};

/// All constraints hold together. Zero constraints means "always holds" (the whole box unsafe).
struct OutputConjunction {
  std::vector<LinearConstraint> constraints;
};

/// One input box and the unsafe output region over it: the case is violated if for some x in
/// the box, SOME disjunct holds at y = f(x).
struct VnnlibCase {
  std::vector<double> input_lower, input_upper;  // size num_inputs, row-major X_0..X_{n-1}
  std::vector<OutputConjunction> disjuncts;
};

struct VnnlibProperty {
  std::string source;  // path or name given
  int64_t num_inputs = 0, num_outputs = 0;
  std::vector<VnnlibCase> cases;  // the property is violated (sat) iff some case is violated
};

/// Reads and parses a VNNLIB file. Throws distcrown::Error if it cannot be read and
/// distcrown::ParseError if it is malformed or uses an unsupported construct.
VnnlibProperty parse_vnnlib_file(const std::string& path);

/// Parses VNNLIB text; `source_name` is used as the file name in error messages and `source`.
VnnlibProperty parse_vnnlib_string(const std::string& text,
                                   const std::string& source_name = "<string>");

}  // namespace distcrown::io
