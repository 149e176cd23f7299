// VNN-COMP's harness scripts (vnncomp/): prepare_instance.sh and run_instance.sh called exactly as
// the competition calls them, on the example model with its property in VNN-LIB 1.0, the same
// property written in 2.0, gzipped inputs, a sat property (its counterexample in the 2.0 result
// form), and the refusals (version string, a missing model).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>

#include "distcrown/io/vnnlib.hpp"
#include "process.hpp"

namespace distcrown {
namespace {

namespace fs = std::filesystem;
using testing::run_captured;
using testing::shell_quote;

const fs::path kSource = DISTCROWN_SOURCE_DIR;
const fs::path kModel = kSource / "examples" / "digits_mlp.onnx";
const fs::path kProperty = kSource / "examples" / "digits_mlp_prop.vnnlib";

// The 1.0 property `p` (one box) in VNN-LIB 2.0, its unsafe outputs replaced by `unsafe` when
// given.
std::string as_vnnlib2(const io::VnnlibProperty& p, const std::string& unsafe = "") {
  std::ostringstream s;
  s.precision(17);
  s << "(vnnlib-version <2.0>)\n(declare-network digits (declare-input X float32 [1, "
    << p.num_inputs << "]) (declare-output Y float32 [1, " << p.num_outputs << "]))\n";
  const io::VnnlibCase& c = p.cases.at(0);
  for (size_t i = 0; i < c.input_lower.size(); ++i) {
    s << "(assert (and (X[0," << i << "] >= " << c.input_lower[i] << ") (<= X[0, " << i << "] "
      << c.input_upper[i] << ")))\n";
  }
  if (!unsafe.empty()) return s.str() + unsafe + "\n";
  s << "(assert (or";
  for (const io::OutputConjunction& d : c.disjuncts) {
    s << " (and";
    for (const io::LinearConstraint& k : d.constraints) {
      s << " (<= (+";
      for (size_t j = 0; j < k.coeffs.size(); ++j) {
        if (k.coeffs[j] != 0) s << " (* " << k.coeffs[j] << " Y[0," << j << "])";
      }
      s << ") " << k.rhs << ")";
    }
    s << ")";
  }
  return s.str() + "))\n";
}

// The property `p` over two copies f and g of the model (VNN-LIB 2.0, `equal-to`): X_f in the
// box, X_g[0, i] == X_f[0, i] for i >= `first_equal`, and X_f[0, 0] <= X_g[0, 0] <= its upper
// bound when first_equal is 1; `unsafe` the output assertion.
std::string two_copies(const io::VnnlibProperty& p, int64_t first_equal,
                       const std::string& unsafe) {
  std::ostringstream s;
  s.precision(17);
  s << "(vnnlib-version <2.0>)\n";
  for (const char* n : {"f", "g"}) {
    s << "(declare-network " << n << (n[0] == 'g' ? " (equal-to f)" : "") << " (declare-input X_"
      << n << " float32 [1, " << p.num_inputs << "]) (declare-output Y_" << n << " float32 [1, "
      << p.num_outputs << "]))\n";
  }
  const io::VnnlibCase& c = p.cases.at(0);
  for (size_t i = 0; i < c.input_lower.size(); ++i) {
    s << "(assert (and (X_f[0," << i << "] >= " << c.input_lower[i] << ") (<= X_f[0, " << i << "] "
      << c.input_upper[i] << ")))\n";
    if (int64_t(i) >= first_equal) s << "(assert (== X_g[0," << i << "] X_f[0," << i << "]))\n";
  }
  if (first_equal == 1) {
    s << "(assert (<= X_f[0,0] X_g[0,0]))\n(assert (<= X_g[0,0] " << c.input_upper[0] << "))\n";
  }
  return s.str() + unsafe + "\n";
}

// The values of a 2.0 counterexample by element name.
std::map<std::string, double> assignment(const std::string& result) {
  std::map<std::string, double> v;
  std::istringstream in(result);
  std::string line;
  while (std::getline(in, line)) {
    const size_t eq = line.find('=');
    if (eq != std::string::npos) v[line.substr(0, eq)] = std::stod(line.substr(eq + 1));
  }
  return v;
}

class Harness : public ::testing::Test {
 protected:
  testing::ProcessResult script(const std::string& name, const std::string& args) {
    const std::string env = "DISTCROWN_BIN=" + shell_quote(DISTCROWN_CLI_PATH) +
                            " DISTCROWN_VNNCOMP_STATE=" + shell_quote((dir_.path() / "state"));
    return run_captured(
        env + " bash " + shell_quote((kSource / "vnncomp" / name).string()) + " " + args,
        dir_.path());
  }
  // prepare_instance.sh then run_instance.sh on (model, property); the result file's text.
  std::string decide(const fs::path& model, const fs::path& property) {
    const std::string files = "test " + shell_quote(model) + " " + shell_quote(property);
    const testing::ProcessResult prep = script("prepare_instance.sh", "v1 " + files);
    EXPECT_EQ(prep.exit_code, 0) << prep.err;
    const fs::path result = dir_.path() / "result.txt";
    const testing::ProcessResult run =
        script("run_instance.sh", "v1 " + files + " " + shell_quote(result) + " 60");
    EXPECT_EQ(run.exit_code, 0) << run.err;
    return testing::read_file(result);
  }
  testing::TempDir dir_;
};

TEST_F(Harness, DecidesTheExampleInBothVersionsAndFromGzippedFiles) {
  EXPECT_EQ(decide(kModel, kProperty), "unsat\n");
  const io::VnnlibProperty p = io::parse_vnnlib_file(kProperty.string());
  const fs::path v2 = testing::write_file(dir_.path() / "prop2.vnnlib", as_vnnlib2(p));
  EXPECT_EQ(decide(kModel, v2), "unsat\n");
  const fs::path gz = dir_.path() / "model.onnx";
  fs::copy_file(kModel, gz);
  ASSERT_EQ(std::system(("gzip " + shell_quote(gz)).c_str()), 0);
  EXPECT_EQ(decide(dir_.path() / "model.onnx.gz", kProperty), "unsat\n");
}

// Class 0's score at most 10⁶ somewhere in the box: sat at any point, with a counterexample of
// one line per element, inputs then outputs.
TEST_F(Harness, ASatPropertyWritesItsCounterexampleInTheFormOfItsVersion) {
  const io::VnnlibProperty p = io::parse_vnnlib_file(kProperty.string());
  const fs::path v2 =
      testing::write_file(dir_.path() / "sat2.vnnlib", as_vnnlib2(p, "(assert (<= Y[0,0] 1e6))"));
  const std::string r = decide(kModel, v2);
  ASSERT_EQ(r.rfind("sat\nX[0,0]=", 0), 0u) << r;
  EXPECT_NE(r.find("\nY[0,9]="), std::string::npos) << r;
  EXPECT_EQ(std::count(r.begin(), r.end(), '\n'), 1 + p.num_inputs + p.num_outputs) << r;
}

// Two copies of the model on one input (every X_g[0, i] == X_f[0, i]): the example's robustness
// property, the label's score read from f and the others' from g, is unsat as it is for one copy.
// With X_g[0, 0] free above X_f[0, 0] and an unsafe set that always holds, the counterexample
// lists f's elements, then g's, and satisfies the relations between them.
TEST_F(Harness, DecidesPropertiesOverTwoCopiesOfTheModel) {
  const io::VnnlibProperty p = io::parse_vnnlib_file(kProperty.string());
  std::string unsafe = "(assert (or";
  for (int64_t j = 0; j < p.num_outputs; ++j) {
    if (j != 2) unsafe += " (>= Y_g[0," + std::to_string(j) + "] Y_f[0,2])";
  }
  const fs::path robust =
      testing::write_file(dir_.path() / "robust2.vnnlib", two_copies(p, 0, unsafe + "))"));
  EXPECT_EQ(decide(kModel, robust), "unsat\n");
  const fs::path order = testing::write_file(
      dir_.path() / "order2.vnnlib", two_copies(p, 1, "(assert (<= Y_f[0,0] (+ Y_g[0,0] 1e6)))"));
  const std::string r = decide(kModel, order);
  ASSERT_EQ(r.rfind("sat\nX_f[0,0]=", 0), 0u) << r;
  EXPECT_EQ(std::count(r.begin(), r.end(), '\n'), 1 + 2 * (p.num_inputs + p.num_outputs)) << r;
  EXPECT_LT(r.find("Y_f[0,9]="), r.find("X_g[0,0]=")) << r;
  std::map<std::string, double> v = assignment(r);
  EXPECT_LE(v.at("X_f[0,0]"), v.at("X_g[0,0]"));
  for (int64_t i = 1; i < p.num_inputs; ++i) {
    const std::string e = "[0," + std::to_string(i) + "]";
    EXPECT_EQ(v.at("X_f" + e), v.at("X_g" + e)) << e;
  }
}

TEST_F(Harness, RefusesAWrongVersionStringAndAMissingModel) {
  const testing::ProcessResult v = script(
      "prepare_instance.sh", "v2 test " + shell_quote(kModel) + " " + shell_quote(kProperty));
  EXPECT_EQ(v.exit_code, 1);
  EXPECT_NE(v.err.find("Expected first argument (version string) 'v1', got 'v2'"),
            std::string::npos)
      << v.err;
  const testing::ProcessResult m =
      script("prepare_instance.sh",
             "v1 test " + shell_quote(dir_.path() / "none.onnx") + " " + shell_quote(kProperty));
  EXPECT_NE(m.exit_code, 0);
  EXPECT_NE(m.err.find("no such file"), std::string::npos) << m.err;
}

}  // namespace
}  // namespace distcrown
