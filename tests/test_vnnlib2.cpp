// VNN-LIB 2.0 properties (io/vnnlib.hpp): declared networks with typed, indexed tensors, prefix
// and infix comparisons, ==, != and strictness, read into the same cases as their 1.0 form; and
// every malformed or unsupported file a one-line error with its line and column.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "distcrown/io/problem.hpp"
#include "distcrown/io/vnnlib.hpp"
#include "distcrown/util/error.hpp"

namespace distcrown::io {
namespace {

constexpr const char* kHeader = "(vnnlib-version <2.0>)\n";

// Parsing `text` throws a ParseError at "t.vnnlib:<line_col>:" whose message holds `fragment`.
void expect_error(const std::string& text, const std::string& line_col,
                  const std::string& fragment) {
  try {
    parse_vnnlib_string(text, "t.vnnlib");
    ADD_FAILURE() << "no ParseError for:\n" << text;
  } catch (const ParseError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("t.vnnlib:" + line_col + ": "), std::string::npos) << msg;
    EXPECT_NE(msg.find(fragment), std::string::npos) << msg;
  }
}

// A network of input [1, 2, 2] and output [3]: elements are numbered row-major; a box from
// prefix and infix bounds and a fixed element (==); strict output comparisons are strict.
TEST(Vnnlib2, IndexedTensorsReadAsTheFlatVariablesOfVersion1) {
  const VnnlibProperty p = parse_vnnlib_string(std::string(kHeader) + R"(
; comment
(declare-network net
    (declare-input X float32 [1, 2, 2] "input")
    (declare-output Y real [3]))
(assert (and (<= X[0,0,0] 1.5) (>= X[0, 0, 0] -1)))
(assert (X[0,0,1] <= 2))
(assert (X[0,0,1] >= 0.5))
(assert (== X[0,1,0] 0.25))
(assert (and (<= 0 X[0,1,1]) (<= X[0,1,1] 3)))
(assert (or (Y[0] < Y[2]) (>= (+ Y[1] (* 2 Y[0])) 4)))
)");
  EXPECT_EQ(p.version, 2);
  ASSERT_EQ(p.networks.size(), 1u);
  EXPECT_EQ(p.networks[0].name, "net");
  EXPECT_EQ(p.networks[0].input_shape, (std::vector<int64_t>{1, 2, 2}));
  EXPECT_EQ(p.num_inputs, 4);
  EXPECT_EQ(p.num_outputs, 3);
  ASSERT_EQ(p.cases.size(), 1u);
  EXPECT_EQ(p.cases[0].input_lower, (std::vector<double>{-1, 0.5, 0.25, 0}));
  EXPECT_EQ(p.cases[0].input_upper, (std::vector<double>{1.5, 2, 0.25, 3}));
  ASSERT_EQ(p.cases[0].disjuncts.size(), 2u);
  const LinearConstraint& a = p.cases[0].disjuncts[0].constraints.at(0);
  EXPECT_EQ(a.coeffs, (std::vector<double>{1, 0, -1}));
  EXPECT_EQ(a.rhs, 0.0);
  EXPECT_TRUE(a.strict);
  const LinearConstraint& b = p.cases[0].disjuncts[1].constraints.at(0);
  EXPECT_EQ(b.coeffs, (std::vector<double>{-2, -1, 0}));
  EXPECT_EQ(b.rhs, -4.0);
  EXPECT_FALSE(b.strict);
  EXPECT_EQ(element_name(p, false, 2), "X[0,1,0]");
  EXPECT_EQ(element_name(p, true, 1), "Y[1]");
}

// The same property in 1.0 and 2.0 gives the same cases.
TEST(Vnnlib2, AgreesWithItsVersion1Form) {
  const VnnlibProperty v1 = parse_vnnlib_string(R"(
(declare-const X_0 Real) (declare-const X_1 Real) (declare-const Y_0 Real) (declare-const Y_1 Real)
(assert (<= X_0 1)) (assert (>= X_0 0)) (assert (<= X_1 0.5)) (assert (>= X_1 -0.5))
(assert (or (and (<= Y_0 Y_1) (>= Y_0 0.1)) (<= Y_1 -3)))
)");
  const VnnlibProperty v2 = parse_vnnlib_string(std::string(kHeader) + R"(
(declare-network f (declare-input X real [2]) (declare-output Y real [2]))
(assert (<= X[0] 1)) (assert (>= X[0] 0)) (assert (X[1] <= 0.5)) (assert (X[1] >= -0.5))
(assert (or (and (Y[0] <= Y[1]) (Y[0] >= 0.1)) (<= Y[1] -3)))
)");
  EXPECT_EQ(v1.version, 1);
  ASSERT_EQ(v1.cases.size(), v2.cases.size());
  EXPECT_EQ(v1.cases[0].input_lower, v2.cases[0].input_lower);
  EXPECT_EQ(v1.cases[0].input_upper, v2.cases[0].input_upper);
  ASSERT_EQ(v1.cases[0].disjuncts.size(), v2.cases[0].disjuncts.size());
  for (size_t d = 0; d < v1.cases[0].disjuncts.size(); ++d) {
    const auto& c1 = v1.cases[0].disjuncts[d].constraints;
    const auto& c2 = v2.cases[0].disjuncts[d].constraints;
    ASSERT_EQ(c1.size(), c2.size());
    for (size_t k = 0; k < c1.size(); ++k) {
      EXPECT_EQ(c1[k].coeffs, c2[k].coeffs);
      EXPECT_EQ(c1[k].rhs, c2[k].rhs);
    }
  }
}

// a != b is (a < b) or (a > b), both strict; a strict input bound x < c is x <= the double below
// c, so that every counterexample satisfies it strictly.
TEST(Vnnlib2, NotEqualAndStrictBounds) {
  const VnnlibProperty p = parse_vnnlib_string(std::string(kHeader) + R"(
(declare-network f (declare-input X real [1]) (declare-output Y real [2]))
(assert (< X[0] 0.5)) (assert (> X[0] -0.5))
(assert (!= Y[0] Y[1]))
)");
  ASSERT_EQ(p.cases.size(), 1u);
  EXPECT_EQ(p.cases[0].input_upper[0], std::nextafter(0.5, -1.0));
  EXPECT_EQ(p.cases[0].input_lower[0], std::nextafter(-0.5, 1.0));
  ASSERT_EQ(p.cases[0].disjuncts.size(), 2u);
  for (const OutputConjunction& d : p.cases[0].disjuncts) {
    ASSERT_EQ(d.constraints.size(), 1u);
    EXPECT_TRUE(d.constraints[0].strict);
  }
  EXPECT_EQ(p.cases[0].disjuncts[0].constraints[0].coeffs, (std::vector<double>{1, -1}));
  EXPECT_EQ(p.cases[0].disjuncts[1].constraints[0].coeffs, (std::vector<double>{-1, 1}));
}

// Two networks, g a copy of f: their elements follow one another; a comparison of several inputs
// is an input constraint, and the box encloses what it implies (X_g[0] >= X_f[0] >= 0).
TEST(Vnnlib2, SeveralNetworksAreNumberedInOrderWithTheirInputRelations) {
  const VnnlibProperty p = parse_vnnlib_string(std::string(kHeader) + R"(
(declare-network f (declare-input X_f real [2]) (declare-output Y_f real [1]))
(declare-network g (equal-to f) (declare-input X_g real [2]) (declare-output Y_g real [1]))
(assert (and (<= 0 X_f[0] ) (<= X_f[0] 1) (<= 0 X_f[1]) (<= X_f[1] 1)))
(assert (and (<= X_f[0] X_g[0]) (<= X_g[0] 1) (== X_f[1] X_g[1])))
(assert (Y_f[0] < Y_g[0]))
)");
  ASSERT_EQ(p.networks.size(), 2u);
  EXPECT_EQ(p.networks[1].equal_to, "f");
  EXPECT_EQ(p.networks[1].input_offset, 2);
  EXPECT_EQ(p.networks[1].output_offset, 1);
  EXPECT_EQ(p.num_inputs, 4);
  EXPECT_EQ(element_name(p, false, 3), "X_g[1]");
  ASSERT_EQ(p.input_constraints.size(), 3u);
  EXPECT_EQ(p.input_constraints[0].coeffs, (std::vector<double>{1, 0, -1, 0}));
  ASSERT_EQ(p.cases.size(), 1u);
  EXPECT_EQ(p.cases[0].input_lower[2], std::nextafter(0.0, -1.0));  // from X_f[0] >= 0
  EXPECT_EQ(p.cases[0].input_upper[3], std::nextafter(1.0, 2.0));   // from X_f[1] <= 1
  EXPECT_EQ(p.cases[0].disjuncts.at(0).constraints.at(0).coeffs, (std::vector<double>{1, -1}));
  EXPECT_TRUE(needs_product(p));
  expect_error(std::string(kHeader) + R"(
(declare-network f (declare-input X real [2]) (declare-output Y real [1]))
(assert (and (<= 0 X[0]) (<= X[0] 1) (<= 0 X[1]) (<= X[1] 1)))
(assert (or (<= X[0] X[1]) (<= Y[0] 0))))",
               "5:13", "relating inputs under an 'or'");
}

TEST(Vnnlib2, MalformedOrUnsupportedFilesNameTheirPlace) {
  const std::string net =
      "(declare-network f (declare-input X real [2]) "
      "(declare-output Y real [1]))\n";
  expect_error("(declare-network f (declare-input X real [2]) (declare-output Y real [1]))", "1:2",
               "must start with (vnnlib-version <2.0>)");
  expect_error(std::string(kHeader) + "(declare-const X_0 Real)", "2:2", "declare-const is");
  expect_error("(declare-const X_0 Real)\n(vnnlib-version <2.0>)", "2:2", "first command");
  expect_error("(vnnlib-version <3.0>)", "1:17", "unsupported VNN-LIB version");
  expect_error("(vnnlib-version 2.0)", "1:17", "expected a version such as <2.0>");
  expect_error(std::string(kHeader) + "(assert (<= 1 2))", "2:18", "no network declared");
  expect_error(std::string(kHeader) + net + "(assert (<= X[2] 1))", "3:13",
               "index 2 out of range for dimension 0 of X (size 2)");
  expect_error(std::string(kHeader) + net + "(assert (<= X[0, 1] 1))", "3:13",
               "X has 1 dimensions, indexed by 2");
  expect_error(std::string(kHeader) + net + "(assert (<= Z[0] 1))", "3:13",
               "undeclared variable 'Z'");
  expect_error(std::string(kHeader) + net + "(assert (<= X[a] 1))", "3:13", "a is not a whole");
  expect_error(std::string(kHeader) + net + "(assert (X[0] + 1))", "3:15", "expected a comparison");
  expect_error(std::string(kHeader) +
                   "(declare-network f (declare-input X real [2]) (declare-hidden H real [2] "
                   "\"h\") (declare-output Y real [1]))",
               "2:48", "unsupported: declare-hidden");
  expect_error(std::string(kHeader) + net + "(declare-network g (isomorphic-to f))", "3:21",
               "unsupported: isomorphic-to");
  expect_error(std::string(kHeader) + net + "(declare-network g (equal-to h))", "3:30",
               "unknown network 'h'");
  expect_error(std::string(kHeader) +
                   "(declare-network f (declare-input X real [2]) (declare-input Z real [2]))",
               "2:48", "several inputs");
  expect_error(std::string(kHeader) + "(declare-network f (declare-input X real [2]))", "2:1",
               "declares no output");
  expect_error(std::string(kHeader) + "(declare-network f (declare-input X int8 [2]))", "2:37",
               "element type 'int8'");
  expect_error(std::string(kHeader) + "(declare-network f (declare-input X real [2, 0]))", "2:42",
               "a dimension of 0");
  expect_error(std::string(kHeader) + net + "(declare-network g (declare-input X real [2]))",
               "3:35", "'X' is already declared");
}

}  // namespace
}  // namespace distcrown::io
