// Tests for the VNNLIB parser: the shared VNN-COMP fixtures, hand-written properties, and error
// reporting (positions) for malformed input.
#include "distcrown/io/vnnlib.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "distcrown/util/error.hpp"

#ifndef DISTCROWN_FIXTURES_DIR
#define DISTCROWN_FIXTURES_DIR "../shared/fixtures"
#endif

namespace distcrown::io {
namespace {

namespace fs = std::filesystem;

// $DISTCROWN_FIXTURES_DIR overrides the configured folder (as in fixtures.hpp).
fs::path fixtures_dir() {
  const char* env = std::getenv("DISTCROWN_FIXTURES_DIR");
  return env != nullptr && *env != 0 ? fs::path(env) : fs::path(DISTCROWN_FIXTURES_DIR);
}
fs::path specs_dir() { return fixtures_dir() / "specs"; }

// DISTCROWN_REQUIRE_FIXTURES=1 (CI): missing fixtures fail instead of skipping.
#define SKIP_WITHOUT_FIXTURES()                                        \
  if (!fs::is_directory(specs_dir())) {                                \
    const char* required = std::getenv("DISTCROWN_REQUIRE_FIXTURES");  \
    if (required != nullptr && std::string(required) == "1")           \
      FAIL() << "shared fixtures not found at " << fixtures_dir()      \
             << " and DISTCROWN_REQUIRE_FIXTURES=1";                   \
    GTEST_SKIP() << "shared fixtures not found at " << fixtures_dir(); \
  }

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// Expects parsing `text` to throw ParseError whose message contains "<src>:<line_col>:" and
// `fragment`.
void expect_parse_error(const std::string& text, const std::string& line_col,
                        const std::string& fragment) {
  try {
    parse_vnnlib_string(text, "t.vnnlib");
    ADD_FAILURE() << "no ParseError for:\n" << text;
  } catch (const ParseError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("t.vnnlib:" + line_col + ": "), std::string::npos) << msg;
    EXPECT_NE(msg.find(fragment), std::string::npos) << msg;
  }
}

// Two inputs, two outputs, lines 1-4.
const char kDecls[] =
    "(declare-const X_0 Real)\n"
    "(declare-const X_1 Real)\n"
    "(declare-const Y_0 Real)\n"
    "(declare-const Y_1 Real)\n";

// The box [0,1] x [-1,1], lines 5-6 after kDecls.
const char kBox[] =
    "(assert (and (>= X_0 0) (<= X_0 1)))\n"
    "(assert (and (>= X_1 -1) (<= X_1 1)))\n";

// --- Fixtures --------------------------------------------------------------------------------

TEST(VnnlibFixtures, EveryFixtureParsesWithRightSizes) {
  SKIP_WITHOUT_FIXTURES();
  int parsed = 0;
  for (const auto& entry : fs::directory_iterator(specs_dir())) {
    if (entry.path().extension() != ".vnnlib") continue;
    std::string name = entry.path().filename().string();
    SCOPED_TRACE(name);
    VnnlibProperty p = parse_vnnlib_file(entry.path().string());
    EXPECT_EQ(p.source, entry.path().string());
    int64_t inputs = 0, outputs = 0, disjuncts = 0;
    if (starts_with(name, "mnist")) {
      inputs = 784, outputs = 10, disjuncts = 9;
    } else if (starts_with(name, "acasxu")) {
      inputs = 5, outputs = 5, disjuncts = 1;
    } else if (starts_with(name, "oval21") || starts_with(name, "cifar10_resnet")) {
      inputs = 3072, outputs = 10, disjuncts = 9;
    } else {
      continue;  // unknown family: only check that it parses
    }
    EXPECT_EQ(p.num_inputs, inputs);
    EXPECT_EQ(p.num_outputs, outputs);
    ASSERT_EQ(p.cases.size(), 1u);
    const VnnlibCase& c = p.cases[0];
    ASSERT_EQ(c.input_lower.size(), static_cast<size_t>(inputs));
    ASSERT_EQ(c.input_upper.size(), static_cast<size_t>(inputs));
    for (int64_t i = 0; i < inputs; ++i) EXPECT_LE(c.input_lower[i], c.input_upper[i]) << i;
    EXPECT_EQ(static_cast<int64_t>(c.disjuncts.size()), disjuncts);
    for (const OutputConjunction& d : c.disjuncts) {
      for (const LinearConstraint& row : d.constraints) {
        EXPECT_EQ(static_cast<int64_t>(row.coeffs.size()), outputs);
      }
    }
    ++parsed;
  }
  EXPECT_GT(parsed, 0);
}

TEST(VnnlibFixtures, AcasXuProperty1) {
  SKIP_WITHOUT_FIXTURES();
  // The file: X bounds as below, then "(assert (>= Y_0 3.991125645861615))".
  VnnlibProperty p = parse_vnnlib_file((specs_dir() / "acasxu_prop_1.vnnlib").string());
  ASSERT_EQ(p.cases.size(), 1u);
  const VnnlibCase& c = p.cases[0];
  EXPECT_EQ(c.input_lower, (std::vector<double>{0.6, -0.5, -0.5, 0.45, -0.5}));
  EXPECT_EQ(c.input_upper, (std::vector<double>{0.679857769, 0.5, 0.5, 0.5, -0.45}));
  ASSERT_EQ(c.disjuncts.size(), 1u);
  ASSERT_EQ(c.disjuncts[0].constraints.size(), 1u);
  const LinearConstraint& row = c.disjuncts[0].constraints[0];
  EXPECT_EQ(row.coeffs, (std::vector<double>{-1, 0, 0, 0, 0}));
  EXPECT_EQ(row.rhs, -3.991125645861615);
}

TEST(VnnlibFixtures, AcasXuProperty2IsOneConjunction) {
  SKIP_WITHOUT_FIXTURES();
  // Four separate asserts "(<= Y_k Y_0)", k = 1..4: conjoined, so one disjunct of 4 rows.
  VnnlibProperty p = parse_vnnlib_file((specs_dir() / "acasxu_prop_2.vnnlib").string());
  ASSERT_EQ(p.cases.size(), 1u);
  ASSERT_EQ(p.cases[0].disjuncts.size(), 1u);
  const auto& rows = p.cases[0].disjuncts[0].constraints;
  ASSERT_EQ(rows.size(), 4u);
  for (size_t k = 1; k <= 4; ++k) {
    std::vector<double> expected(5, 0.0);
    expected[0] = -1.0;
    expected[k] = 1.0;
    EXPECT_EQ(rows[k - 1].coeffs, expected) << k;
    EXPECT_EQ(rows[k - 1].rhs, 0.0);
  }
}

TEST(VnnlibFixtures, MnistPropertyHasNineSingleRowDisjuncts) {
  SKIP_WITHOUT_FIXTURES();
  // Label 4: "(assert (or (and (>= Y_0 Y_4)) ... (and (>= Y_9 Y_4))))", skipping Y_4, and
  // "(assert (<= X_0 0.029999999329447746))" / "(assert (>= X_0 0.0))".
  VnnlibProperty p = parse_vnnlib_file((specs_dir() / "mnist_prop_0_0.03.vnnlib").string());
  ASSERT_EQ(p.cases.size(), 1u);
  const VnnlibCase& c = p.cases[0];
  EXPECT_EQ(c.input_lower[0], 0.0);
  EXPECT_EQ(c.input_upper[0], 0.029999999329447746);
  ASSERT_EQ(c.disjuncts.size(), 9u);
  int k = 0;
  for (const OutputConjunction& d : c.disjuncts) {
    if (k == 4) ++k;
    ASSERT_EQ(d.constraints.size(), 1u);
    std::vector<double> expected(10, 0.0);
    expected[k] = -1.0;  // Y_k >= Y_4  <=>  Y_4 - Y_k <= 0
    expected[4] = 1.0;
    EXPECT_EQ(d.constraints[0].coeffs, expected) << k;
    EXPECT_EQ(d.constraints[0].rhs, 0.0);
    ++k;
  }
}

TEST(VnnlibFixtures, BigFileParsesQuickly) {
  SKIP_WITHOUT_FIXTURES();
  fs::path path;
  for (const auto& entry : fs::directory_iterator(specs_dir())) {
    if (starts_with(entry.path().filename().string(), "oval21")) path = entry.path();
  }
  if (path.empty()) {
    const char* required = std::getenv("DISTCROWN_REQUIRE_FIXTURES");
    if (required != nullptr && std::string(required) == "1") {
      FAIL() << "no oval21 fixture in " << specs_dir() << " and DISTCROWN_REQUIRE_FIXTURES=1";
    }
    GTEST_SKIP() << "no oval21 fixture";
  }
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 5; ++i) parse_vnnlib_file(path.string());
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 5.0);  // ~ms each in practice; generous for loaded machines
}

TEST(VnnlibFile, MissingFileThrowsErrorNamingPath) {
  const std::string path = "/nonexistent/dir/prop.vnnlib";
  try {
    parse_vnnlib_file(path);
    FAIL() << "expected distcrown::Error";
  } catch (const ParseError&) {
    FAIL() << "a missing file is not a parse error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

// --- Hand-written properties -----------------------------------------------------------------

TEST(VnnlibString, OrOverInputsGivesTwoCases) {
  std::string text = std::string(kDecls) +
                     "; two boxes, the first one twice\n"
                     "(assert (or\n"
                     "  (and (>= X_0 0) (<= X_0 1) (>= X_1 -1) (<= X_1 .5) (>= Y_0 (+ Y_1 2)))\n"
                     "  (and (>= X_0 1) (<= X_0 2) (> X_1 -1) (< X_1 .5) (<= (* 2 Y_0) (- 1e-3)))\n"
                     "  (and (<= 0 X_0) (<= X_0 1) (>= X_1 -1) (<= X_1 0.5)\n"
                     "       (> (- Y_1 Y_0) 3) (<= (* Y_1 -0.5) 1))))\n";
  VnnlibProperty p = parse_vnnlib_string(text, "hand");
  EXPECT_EQ(p.source, "hand");
  EXPECT_EQ(p.num_inputs, 2);
  EXPECT_EQ(p.num_outputs, 2);
  ASSERT_EQ(p.cases.size(), 2u);

  const VnnlibCase& a = p.cases[0];
  EXPECT_EQ(a.input_lower, (std::vector<double>{0, -1}));
  EXPECT_EQ(a.input_upper, (std::vector<double>{1, 0.5}));
  ASSERT_EQ(a.disjuncts.size(), 2u);
  ASSERT_EQ(a.disjuncts[0].constraints.size(), 1u);
  EXPECT_EQ(a.disjuncts[0].constraints[0].coeffs, (std::vector<double>{-1, 1}));
  EXPECT_EQ(a.disjuncts[0].constraints[0].rhs, -2);
  ASSERT_EQ(a.disjuncts[1].constraints.size(), 2u);
  EXPECT_EQ(a.disjuncts[1].constraints[0].coeffs, (std::vector<double>{1, -1}));  // Y0-Y1<=-3
  EXPECT_EQ(a.disjuncts[1].constraints[0].rhs, -3);
  EXPECT_EQ(a.disjuncts[1].constraints[1].coeffs, (std::vector<double>{0, -0.5}));
  EXPECT_EQ(a.disjuncts[1].constraints[1].rhs, 1);

  // Strict input bounds (> X_1 -1) (< X_1 .5) are the doubles just inside.
  const VnnlibCase& b = p.cases[1];
  EXPECT_EQ(b.input_lower, (std::vector<double>{1, std::nextafter(-1.0, 0.0)}));
  EXPECT_EQ(b.input_upper, (std::vector<double>{2, std::nextafter(0.5, 0.0)}));
  ASSERT_EQ(b.disjuncts.size(), 1u);
  ASSERT_EQ(b.disjuncts[0].constraints.size(), 1u);
  EXPECT_EQ(b.disjuncts[0].constraints[0].coeffs, (std::vector<double>{2, 0}));
  EXPECT_EQ(b.disjuncts[0].constraints[0].rhs, -1e-3);
}

TEST(VnnlibString, CommonConstraintsJoinEveryDisjunctInFileOrder) {
  std::string text = std::string(kDecls) +
                     "(assert (<= X_0 1))\n"
                     "(assert (or (and (<= X_1 1) (>= Y_0 1)) (and (<= X_1 2) (>= Y_1 2))))\n"
                     "(assert (>= X_0 0.25))\n"
                     "(assert (>= X_1 0))\n"
                     "(assert (<= (+ Y_0 Y_1 Y_0) 7))\n";
  VnnlibProperty p = parse_vnnlib_string(text);
  EXPECT_EQ(p.source, "<string>");
  ASSERT_EQ(p.cases.size(), 2u);
  for (size_t k = 0; k < 2; ++k) {
    const VnnlibCase& c = p.cases[k];
    EXPECT_EQ(c.input_lower, (std::vector<double>{0.25, 0}));
    EXPECT_EQ(c.input_upper, (std::vector<double>{1, k == 0 ? 1.0 : 2.0}));
    ASSERT_EQ(c.disjuncts.size(), 1u);
    const auto& rows = c.disjuncts[0].constraints;
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_EQ(rows[0].coeffs, k == 0 ? (std::vector<double>{-1, 0}) : (std::vector<double>{0, -1}));
    EXPECT_EQ(rows[0].rhs, k == 0 ? -1.0 : -2.0);
    EXPECT_EQ(rows[1].coeffs, (std::vector<double>{2, 1}));
    EXPECT_EQ(rows[1].rhs, 7.0);
  }
}

TEST(VnnlibString, TermWithoutOutputConstraintMakesWholeBoxUnsafe) {
  std::string text = std::string(kDecls) + kBox + "(assert (or (>= Y_0 5) (<= 1 2)))\n";
  VnnlibProperty p = parse_vnnlib_string(text);
  ASSERT_EQ(p.cases.size(), 1u);
  ASSERT_EQ(p.cases[0].disjuncts.size(), 2u);
  EXPECT_EQ(p.cases[0].disjuncts[0].constraints.size(), 1u);
  EXPECT_TRUE(p.cases[0].disjuncts[1].constraints.empty());
}

TEST(VnnlibString, NoOutputAssertMeansWholeBoxUnsafe) {
  VnnlibProperty p = parse_vnnlib_string(std::string(kDecls) + kBox);
  ASSERT_EQ(p.cases.size(), 1u);
  ASSERT_EQ(p.cases[0].disjuncts.size(), 1u);
  EXPECT_TRUE(p.cases[0].disjuncts[0].constraints.empty());
}

TEST(VnnlibString, FalseConstantsAndEmptyBoxesDropTerms) {
  std::string text = std::string(kDecls) + kBox +
                     "(assert (or (and (>= Y_0 1) (> 0 1))\n"              // false constant
                     "            (and (>= Y_0 2) (>= X_0 3))\n"           // empty box
                     "            (and (>= Y_0 3) (>= 1 (* 2 0.5)))))\n";  // true constant
  VnnlibProperty p = parse_vnnlib_string(text);
  ASSERT_EQ(p.cases.size(), 1u);
  ASSERT_EQ(p.cases[0].disjuncts.size(), 1u);
  ASSERT_EQ(p.cases[0].disjuncts[0].constraints.size(), 1u);
  EXPECT_EQ(p.cases[0].disjuncts[0].constraints[0].rhs, -3.0);

  VnnlibProperty none = parse_vnnlib_string(std::string(kDecls) + kBox + "(assert (>= X_0 2))\n");
  EXPECT_EQ(none.num_inputs, 2);
  EXPECT_TRUE(none.cases.empty());
}

TEST(VnnlibString, ScaledAndEqualityBounds) {
  std::string text = std::string(kDecls) +
                     "(assert (<= (* 2 X_0) 1))\n"
                     "(assert (>= (* -4 X_0) -4))\n"  // X_0 <= 1, looser
                     "(assert (<= (- X_0) 0.5))\n"    // X_0 >= -0.5
                     "(assert (= X_1 0.25))\n"
                     "(assert (= Y_0 Y_1))\n";
  VnnlibProperty p = parse_vnnlib_string(text);
  ASSERT_EQ(p.cases.size(), 1u);
  EXPECT_EQ(p.cases[0].input_lower, (std::vector<double>{-0.5, 0.25}));
  EXPECT_EQ(p.cases[0].input_upper, (std::vector<double>{0.5, 0.25}));
  ASSERT_EQ(p.cases[0].disjuncts.size(), 1u);
  EXPECT_EQ(p.cases[0].disjuncts[0].constraints.size(), 2u);
}

TEST(VnnlibString, CommentsCrlfAndTabs) {
  std::string text =
      "; header\r\n(declare-const X_0 Real) ; trailing\r\n\t(declare-const Y_0 Real)\r\n"
      "(assert (<= X_0 +1.5e0));(assert (<= X_0 99))\r\n(assert (>= X_0 -1E-3))\r\n"
      "(check-sat)\r\n";
  VnnlibProperty p = parse_vnnlib_string(text);
  ASSERT_EQ(p.cases.size(), 1u);
  EXPECT_EQ(p.cases[0].input_lower, (std::vector<double>{-1e-3}));
  EXPECT_EQ(p.cases[0].input_upper, (std::vector<double>{1.5}));
}

TEST(VnnlibString, DnfBlowUpIsRejected) {
  std::string text = std::string(kDecls) + kBox;
  for (int i = 0; i < 20; ++i) text += "(assert (or (>= Y_0 1) (>= Y_1 1)))\n";  // 2^20 terms
  expect_parse_error(text, "26:1", "more than 1000000 terms");
}

// --- Malformed input -------------------------------------------------------------------------

TEST(VnnlibErrors, UnbalancedParentheses) {
  expect_parse_error(std::string(kDecls) + "(assert (<= X_0 1)\n", "6:1",
                     "unexpected end of file: expected ')' closing assert opened at 5:1");
  expect_parse_error(std::string(kDecls) + "(assert (and (<= X_0 1)", "5:24",
                     "unexpected end of file: expected ')' closing '(' opened at 5:9");
  expect_parse_error(std::string(kDecls) + "(assert (<= X_0 1)))\n", "5:20", "unbalanced ')'");
  expect_parse_error("(declare-const X_0 Real", "1:24",
                     "unexpected end of file: expected ')' closing declare-const opened at 1:1");
  expect_parse_error(std::string(kDecls) + "(assert (<= X_0 1) (<= X_0 2))", "5:20",
                     "expected ')' closing assert opened at 5:1, found '('");
}

TEST(VnnlibErrors, UndeclaredAndRedeclaredVariables) {
  expect_parse_error(std::string(kDecls) + "(assert (<= Y_0 X_7))\n", "5:17",
                     "undeclared variable 'X_7'");
  expect_parse_error("(assert (<= X_0 1))\n(declare-const X_0 Real)\n", "1:13",
                     "undeclared variable 'X_0'");
  expect_parse_error(std::string(kDecls) + "  (declare-const Y_1 Real)\n", "5:18",
                     "Y_1 is already declared at 4:16");
  expect_parse_error("(declare-const X_0 Real)\n(declare-const X_2 Real)\n(declare-const Y_0 Real)",
                     "2:16", "X_2 is declared but X_1 is not");
  expect_parse_error("(declare-const X_0 Real)\n(declare-const Z_0 Real)", "2:16",
                     "unsupported: variable name 'Z_0'");
  expect_parse_error("(declare-const X_0 Int)", "1:20", "unsupported: sort 'Int'");
  expect_parse_error("(declare-const X_0 Real)\n", "2:1", "no output variables declared");
}

TEST(VnnlibErrors, MissingBound) {
  expect_parse_error(std::string(kDecls) +
                         "(assert (>= X_0 0))\n(assert (<= X_0 1))\n"
                         "(assert (<= X_1 1))\n",
                     "2:16", "X_1 has no lower bound");
  expect_parse_error(std::string(kDecls) +
                         "(assert (and (>= X_0 0) (<= X_0 1) (>= X_1 0)))\n"
                         "(assert (or (<= X_1 1) (>= Y_0 0)))\n",
                     "2:16", "X_1 has no upper bound in disjunct 2 of 2");
}

TEST(VnnlibErrors, UnknownOperatorAndCommand) {
  expect_parse_error(std::string(kDecls) + "(assert (not (<= X_0 1)))\n", "5:10",
                     "unknown operator 'not'");
  expect_parse_error(std::string(kDecls) + "(assert (<= (/ X_0 2) 1))\n", "5:14",
                     "unknown operator '/' in a term");
  expect_parse_error(std::string(kDecls) + "(define-fun f () Real 1)\n", "5:2",
                     "unknown command 'define-fun'");
  expect_parse_error(std::string(kDecls) + "(assert ((<= X_0 1)))\n", "5:10",
                     "expected an operator, found '('");
}

TEST(VnnlibErrors, WrongArity) {
  expect_parse_error(std::string(kDecls) + "(assert (<= X_0 1 2))\n", "5:19",
                     "'<=' takes 2 arguments, found a third");
  expect_parse_error(std::string(kDecls) + "(assert (>= X_0))\n", "5:10",
                     "'>=' takes 2 arguments, found 1");
  expect_parse_error(std::string(kDecls) + "(assert (or))\n", "5:10",
                     "'or' needs at least one argument");
  expect_parse_error(std::string(kDecls) + "(assert (<= (* 2) X_0))\n", "5:14",
                     "'*' takes at least 2 arguments");
}

TEST(VnnlibErrors, UnsupportedConstraints) {
  expect_parse_error(std::string(kDecls) + "(assert (<= X_0 Y_0))\n", "5:9",
                     "unsupported: comparison mixes input (X) and output (Y)");
  expect_parse_error(std::string(kDecls) + "(assert (<= X_0 X_1))\n", "5:9",
                     "unsupported: a constraint on inputs must bound a single input");
  expect_parse_error(std::string(kDecls) + "(assert (<= (* Y_0 Y_1) 1))\n", "5:20",
                     "unsupported: non-linear term");
}

TEST(VnnlibErrors, BadNumbersAndGarbage) {
  expect_parse_error(std::string(kDecls) + "(assert (<= X_0 0.5.3))\n", "5:17",
                     "bad number '0.5.3'");
  expect_parse_error(std::string(kDecls) + "(assert (<= X_0 1e))\n", "5:17", "bad number '1e'");
  expect_parse_error(std::string(kDecls) + "(assert (<= X_0 1e999))\n", "5:17",
                     "number out of range");
  expect_parse_error(std::string(kDecls) + "(assert (<= X_0 #x1))\n", "5:17",
                     "expected a number or a variable, found '#x1'");
  expect_parse_error(std::string(kDecls) + "garbage\n", "5:1",
                     "expected '(' starting a command, found 'garbage'");
  expect_parse_error(std::string(kDecls) + "(assert X_0)\n", "5:9",
                     "expected '(' starting a formula");
}

TEST(VnnlibErrors, DeepNestingIsAnErrorNotACrash) {
  std::string text = std::string(kDecls) + "(assert ";
  for (int i = 0; i < 5000; ++i) text += "(and ";
  expect_parse_error(text, "5:5009", "nesting deeper than");
}

TEST(VnnlibErrors, EveryPrefixParsesOrThrowsParseError) {
  std::string text = std::string(kDecls) + kBox +
                     "(assert (or (and (>= Y_0 (+ Y_1 -1.5e-2)) (< (* 2 Y_1) 3)) (>= Y_1 .5)))\n";
  int parsed = 0;
  for (size_t n = 0; n <= text.size(); ++n) {
    try {
      parse_vnnlib_string(text.substr(0, n));
      ++parsed;
    } catch (const ParseError&) {
    }
  }
  EXPECT_GE(parsed, 1);  // at least the whole text
}

}  // namespace
}  // namespace distcrown::io
