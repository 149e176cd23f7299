#pragma once
// VNNLIB property parser (the VNN-COMP property format).
//
// Format: a subset of SMT-LIB 2. A file declares real-valued input variables X_0..X_{n-1} and
// output variables Y_0..Y_{m-1} with `(declare-const X_<i> Real)`, then states `(assert F)`
// formulas. Comments run from `;` to the end of the line. Formulas are built from `and`, `or`
// and comparisons `<=`, `>=`, `<`, `>` (and `=`) between linear terms: numbers, variables,
// `(+ t...)`, `(- t)`, `(- t1 t2...)`, `(* c t)`. A proof covers the closure of the unsafe set
// (strict and non-strict comparisons alike: the boundary does not matter for bounds); a
// counterexample must satisfy a strict comparison strictly (LinearConstraint::strict), and a
// strict bound on an input, x < c, is read as x <= the largest double below c.
//
// VNN-LIB 2.0 (a file that starts with `(vnnlib-version <2.0>)`) declares networks instead:
// `(declare-network f (declare-input X real [1, 5]) (declare-output Y real [5]))`, with one
// input and one output tensor per network, of any shape, whose elements formulas name as
// `X[0, 3]`; `(equal-to f)` declares a copy of network f. Comparisons are also `==` and `!=`,
// prefix or infix (`(Y[0] < Y[1])`). Elements are numbered as X_i and Y_j in declaration order,
// row-major (VnnlibProperty::networks says which network owns which). A comparison of several
// inputs (`(<= X_f[0] X_g[0])`, `(== X_f[1] X_g[1])`) is kept as an input constraint when it is
// not under an `or`. Hidden tensors (`declare-hidden`) and `isomorphic-to` are refused as
// unsupported.
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

/// sum_j coeffs[j] * Y_j <= rhs (< rhs when strict), with coeffs.size() == num_outputs.
struct LinearConstraint {
  std::vector<double> coeffs;
  double rhs = 0.0;
  bool strict = false;
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

/// A network of a VNN-LIB 2.0 file: its input elements are X_i for i in [input_offset,
/// input_offset + num_inputs), its outputs likewise.
struct NetworkDeclaration {
  std::string name;
  std::string equal_to;  // the network this one is a copy of (`equal-to`), else empty
  int64_t input_offset = 0, num_inputs = 0, output_offset = 0, num_outputs = 0;
  std::string input_name, output_name;             // the tensors' names
  std::vector<int64_t> input_shape, output_shape;  // as declared ([] for a scalar)
};

struct VnnlibProperty {
  std::string source;  // path or name given
  int version = 1;     // 1 or 2 (the file's vnnlib-version)
  int64_t num_inputs = 0, num_outputs = 0;
  std::vector<VnnlibCase> cases;  // the property is violated (sat) iff some case is violated
  std::vector<NetworkDeclaration> networks;  // 2.0: in declaration order; 1.0: empty
  /// 2.0: constraints relating inputs (coeffs over X_i, rhs, strict), common to every case; each
  /// case's box already encloses every input that satisfies them.
  std::vector<LinearConstraint> input_constraints;
  /// Set by io::product_problem, which lowers the property onto one graph: declared input i is
  /// the graph's input lowered_inputs[i], and the graph's first outputs are the declared ones.
  std::vector<int64_t> lowered_inputs;
};

/// How the file names flat input (or output) element `index`: X_i / Y_j in 1.0, the declared
/// tensor's element in 2.0 ("X[0,3]"; a scalar tensor by its name).
std::string element_name(const VnnlibProperty& property, bool is_output, int64_t index);

/// Reads and parses a VNNLIB file. Throws distcrown::Error if it cannot be read and
/// distcrown::ParseError if it is malformed or uses an unsupported construct.
VnnlibProperty parse_vnnlib_file(const std::string& path);

/// Parses VNNLIB text; `source_name` is used as the file name in error messages and `source`.
VnnlibProperty parse_vnnlib_string(const std::string& text,
                                   const std::string& source_name = "<string>");

}  // namespace distcrown::io
