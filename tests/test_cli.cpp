// End-to-end tests of the distcrown executable (DISTCROWN_CLI_PATH): `distcrown bounds` on the
// embedded default and on files, its table and --result JSON output, its error reporting (one
// line on stderr starting "distcrown: error:", exit code 1, usage errors included), the option
// model shared by both commands (one table, --config FILE.yaml, `verify --result` always written),
// and the enum name tables (util/enum_names.hpp).

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "bounds_table.hpp"
#include "distcrown/bab/verifier.hpp"
#include "distcrown/methods/options.hpp"
#include "distcrown/sharding/sharded_param.hpp"
#include "distcrown/util/enum_names.hpp"
#include "distcrown/util/error.hpp"
#include "fixtures.hpp"
#include "onnx_builder.hpp"
#include "process.hpp"

namespace distcrown {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kSourceDir = DISTCROWN_SOURCE_DIR;
const fs::path kExampleModel = kSourceDir / "examples" / "digits_mlp.onnx";
const fs::path kExampleProperty = kSourceDir / "examples" / "digits_mlp_prop.vnnlib";
constexpr size_t kDigitsOutputs = 10;
constexpr size_t kDigitsLabel = 2;  // examples/README.md: test image 0 is a 2

std::string quote(const std::string& s) { return "'" + s + "'"; }
std::string quote(const fs::path& p) { return quote(p.string()); }

using CliResult = testing::ProcessResult;

class Cli : public ::testing::Test {
 protected:
  // Runs `distcrown <args>` with stdout and stderr captured in the temp dir.
  CliResult run(const std::string& args) {
    return testing::run_captured(quote(std::string(DISTCROWN_CLI_PATH)) + " " + args, dir_.path());
  }

  // Runs `distcrown bounds <args> --result FILE`, expects success and returns the JSON.
  json bounds_json(const std::string& args) {
    const fs::path file = dir_ / "bounds.json";
    std::remove(file.c_str());
    const CliResult r = run("bounds " + args + " --result " + quote(file));
    EXPECT_EQ(r.exit_code, 0) << "args: " << args << "\nstderr: " << r.err;
    if (!fs::exists(file)) {
      ADD_FAILURE() << "no JSON written for: " << args;
      return json::object();
    }
    return testing::read_json(file);
  }

  fs::path write(const std::string& name, const std::string& content) {
    return testing::write_file(dir_ / name, content);
  }

  testing::TempDir dir_;
};

// The JSON contract: method, lower/upper (n floats, lower <= upper), time_s and memory in bytes.
void expect_bounds_json(const json& j, const std::string& method, size_t n) {
  ASSERT_TRUE(j.is_object()) << j.dump();
  EXPECT_EQ(j.value("method", ""), method);
  ASSERT_TRUE(j.contains("lower") && j["lower"].is_array()) << j.dump();
  ASSERT_TRUE(j.contains("upper") && j["upper"].is_array()) << j.dump();
  ASSERT_EQ(j["lower"].size(), n);
  ASSERT_EQ(j["upper"].size(), n);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_TRUE(j["lower"][i].is_number() && j["upper"][i].is_number()) << j.dump();
    EXPECT_LE(j["lower"][i].get<double>(), j["upper"][i].get<double>()) << "output " << i;
  }
  ASSERT_TRUE(j.contains("time_s") && j["time_s"].is_number()) << j.dump();
  EXPECT_GE(j["time_s"].get<double>(), 0.0);
  ASSERT_TRUE(j.contains("memory") && j["memory"].is_object()) << j.dump();
  for (const char* key : {"baseline_bytes", "peak_bytes"}) {
    ASSERT_TRUE(j["memory"].contains(key)) << key;
    EXPECT_TRUE(j["memory"][key].is_number_integer()) << key << ": " << j["memory"][key];
  }
  // Loading the model and the box leaves live tensors; bounding allocates more.
  EXPECT_GT(j["memory"]["baseline_bytes"].get<int64_t>(), 0);
  EXPECT_GT(j["memory"]["peak_bytes"].get<int64_t>(), 0);
}

std::vector<double> doubles(const json& j) { return j.get<std::vector<double>>(); }

size_t count_lines(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += c == '\n' ? 1 : 0;
  return n;
}

// A failed run (README.md): exit code 1, and stderr exactly one line "distcrown: error: ..." that
// contains every fragment.
void expect_one_error_line(const CliResult& r, const std::vector<std::string>& fragments) {
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(count_lines(r.err), 1u) << "stderr:\n" << r.err;
  EXPECT_TRUE(!r.err.empty() && r.err.back() == '\n') << "stderr:\n" << r.err;
  EXPECT_EQ(r.err.rfind("distcrown: error:", 0), 0u) << "stderr:\n" << r.err;
  for (const auto& f : fragments) {
    EXPECT_NE(r.err.find(f), std::string::npos) << "stderr lacks '" << f << "':\n" << r.err;
  }
}

TEST_F(Cli, BoundsWithoutArgumentsPrintsATable) {
  const CliResult r = run("bounds");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_NE(r.out.find("crown bounds of 10 outputs"), std::string::npos) << r.out;
  const testing::BoundsTable t = testing::read_bounds_table(r.out);
  EXPECT_TRUE(t.header) << r.out;
  EXPECT_EQ(t.rows, kDigitsOutputs) << r.out;
}

TEST_F(Cli, JsonOutputIbpAndCrown) {
  for (const std::string method : {"ibp", "crown"}) {
    SCOPED_TRACE(method);
    expect_bounds_json(bounds_json("--method " + method), method, kDigitsOutputs);
  }
}

double max_abs_difference(const std::vector<double>& a, const std::vector<double>& b) {
  double d = a.size() == b.size() ? 0.0 : INFINITY;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

TEST_F(Cli, CrownBatchSizeDoesNotChangeBounds) {
  // Bounding intermediate neurons 5 at a time computes the same bounds; the BLAS rounds a row
  // of a product differently depending on how many rows it has, so allow float32 rounding
  // (a few ulps of the intermediate bounds, amplified by the later layers).
  const json all = bounds_json("--method crown");
  const json batched = bounds_json("--method crown --crown-batch-size 5");
  expect_bounds_json(batched, "crown", kDigitsOutputs);
  for (const char* side : {"lower", "upper"}) {
    const auto a = doubles(all[side]);
    const auto b = doubles(batched[side]);
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_NEAR(b[i], a[i], 1e-5 * std::max(1.0, std::abs(a[i])))
          << side << " " << i << ": largest |difference| " << max_abs_difference(a, b);
    }
  }
}

TEST_F(Cli, EmbeddedDefaultIsVerifiedByCrown) {
  // examples/README.md: the label is 2 and the property is UNSAT, with a margin that plain
  // interval arithmetic already proves; CROWN's output bounds must separate Y_2 from the rest.
  const json j = bounds_json("--method crown");
  expect_bounds_json(j, "crown", kDigitsOutputs);
  const auto lower = doubles(j["lower"]);
  const auto upper = doubles(j["upper"]);
  for (size_t k = 0; k < kDigitsOutputs; ++k) {
    if (k == kDigitsLabel) continue;
    EXPECT_GT(lower[kDigitsLabel], upper[k]) << "Y_2 lower vs Y_" << k << " upper";
  }
}

// The example files give the embedded defaults' bounds (the build embeds those files: a byte
// lost or changed on the way shows here), and what `bounds` bounds is what the files say: with
// IBP, a copy of the property with one input's interval widened gives other bounds, containing
// the default's, and a model of our own whose outputs are the inputs X_54..X_63 gives exactly
// the property's intervals of those inputs.
TEST_F(Cli, ExampleFilesGiveTheEmbeddedDefaultsBounds) {
  const std::string text = testing::read_file(kExampleProperty);
  // The property's input intervals, as written.
  std::vector<double> lo(64, NAN);
  std::vector<double> hi(64, NAN);
  const std::regex bound(R"(\(assert \(([<>])= X_(\d+) ([-+0-9.eE]+)\)\))");
  for (std::sregex_iterator it(text.begin(), text.end(), bound), end; it != end; ++it) {
    const auto i = std::stoul((*it)[2].str());
    ASSERT_LT(i, lo.size()) << it->str();
    ((*it)[1].str() == "<" ? hi : lo)[i] = std::stod((*it)[3].str());
  }
  const std::string narrow = "(assert (<= X_60 0.52))";
  const size_t at = text.find(narrow);
  ASSERT_NE(at, std::string::npos) << "the example property changed: widen another input";
  std::string wider_text = text;
  wider_text.replace(at, narrow.size(), "(assert (<= X_60 0.72))");
  const fs::path wider = write("wider.vnnlib", wider_text);

  testing::OnnxBuilder b;
  b.input("x", {1, 64}).output("y", {1, kDigitsOutputs});
  at::Tensor w = at::zeros({int64_t(kDigitsOutputs), 64});
  for (int64_t k = 0; k < int64_t(kDigitsOutputs); ++k) w.select(0, k).select(0, 54 + k).fill_(1);
  b.initializer("W", w).initializer("b", at::zeros({int64_t(kDigitsOutputs)}));
  b.node("fc", "Gemm", {"x", "W", "b"}, {"y"}, {testing::attr_int("transB", 1)});
  const fs::path selection = write("selection.onnx", b.bytes());

  for (const std::string method : {"ibp", "crown"}) {
    SCOPED_TRACE(method);
    const json embedded = bounds_json("--method " + method);
    const json from_files = bounds_json("--model " + quote(kExampleModel) + " --vnnlib " +
                                        quote(kExampleProperty) + " --method " + method);
    expect_bounds_json(from_files, method, kDigitsOutputs);
    EXPECT_EQ(doubles(from_files["lower"]), doubles(embedded["lower"]));
    EXPECT_EQ(doubles(from_files["upper"]), doubles(embedded["upper"]));
    if (method != "ibp") continue;
    // Interval arithmetic, monotone in the box: the widened property's bounds contain the
    // default's, and differ from them.
    const json widened = bounds_json("--model " + quote(kExampleModel) + " --vnnlib " +
                                     quote(wider) + " --method ibp");
    expect_bounds_json(widened, method, kDigitsOutputs);
    EXPECT_TRUE(doubles(widened["lower"]) != doubles(embedded["lower"]) ||
                doubles(widened["upper"]) != doubles(embedded["upper"]))
        << "the widened property's bounds are the default's: " << widened.dump();
    for (size_t k = 0; k < kDigitsOutputs; ++k) {
      EXPECT_LE(doubles(widened["lower"])[k], doubles(embedded["lower"])[k]) << "Y_" << k;
      EXPECT_GE(doubles(widened["upper"])[k], doubles(embedded["upper"])[k]) << "Y_" << k;
    }
    const json selected = bounds_json("--model " + quote(selection) + " --vnnlib " +
                                      quote(kExampleProperty) + " --method ibp");
    expect_bounds_json(selected, method, kDigitsOutputs);
    for (size_t k = 0; k < kDigitsOutputs; ++k) {
      EXPECT_NEAR(doubles(selected["lower"])[k], lo[54 + k], 1e-6) << "Y_" << k;
      EXPECT_NEAR(doubles(selected["upper"])[k], hi[54 + k], 1e-6) << "Y_" << k;
    }
  }
}

TEST_F(Cli, CorruptModelFile) {
  const fs::path model = write("corrupt.onnx", "\x08\x07this is not an ONNX model\xff\xfe\x01");
  const CliResult r =
      run("bounds --model " + quote(model) + " --vnnlib " + quote(kExampleProperty));
  expect_one_error_line(r, {model.string()});
}

TEST_F(Cli, EveryUnsupportedNodeOnItsOwnLine) {
  // A model with two operators that have no lowering: the error line, then one line per node.
  testing::OnnxBuilder b;
  b.input("x", {1, 64}).output("y", {1, 64});
  b.node("hard", "Hardmax", {"x"}, {"h"});
  b.node("lstm", "LSTM", {"h"}, {"y"});
  const fs::path model = write("two_unsupported.onnx", b.bytes());
  const CliResult r =
      run("bounds --model " + quote(model) + " --vnnlib " + quote(kExampleProperty));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "distcrown: error: " + model.string() +
                       ": unsupported: 2 nodes cannot be lowered:\n"
                       "  node 'hard' (Hardmax): unsupported operator Hardmax\n"
                       "  node 'lstm' (LSTM): unsupported operator LSTM\n");
  EXPECT_EQ(r.out, "");
}

TEST_F(Cli, VnnlibSyntaxError) {
  const fs::path prop = write("syntax.vnnlib",
                              "(declare-const X_0 Real)\n"
                              "(assert (<= X_0 0.5) ))\n");
  const CliResult r = run("bounds --model " + quote(kExampleModel) + " --vnnlib " + quote(prop));
  expect_one_error_line(r, {prop.string() + ":2:"});
  // FILE:LINE:COL: with a numeric column.
  const size_t at = r.err.find(prop.string() + ":2:");
  ASSERT_NE(at, std::string::npos);
  size_t i = at + prop.string().size() + 3;
  EXPECT_TRUE(i < r.err.size() && std::isdigit(static_cast<unsigned char>(r.err[i]))) << r.err;
  while (i < r.err.size() && std::isdigit(static_cast<unsigned char>(r.err[i]))) ++i;
  EXPECT_TRUE(i < r.err.size() && r.err[i] == ':') << r.err;
}

TEST_F(Cli, PropertyInputCountDoesNotMatchModel) {
  std::string text;
  for (int i = 0; i < 3; ++i) text += "(declare-const X_" + std::to_string(i) + " Real)\n";
  for (int j = 0; j < 10; ++j) text += "(declare-const Y_" + std::to_string(j) + " Real)\n";
  for (int i = 0; i < 3; ++i) {
    const std::string x = "X_" + std::to_string(i);
    text += "(assert (>= " + x + " 0.0))\n(assert (<= " + x + " 1.0))\n";
  }
  text += "(assert (>= Y_0 Y_1))\n";
  const fs::path prop = write("three_inputs.vnnlib", text);
  const CliResult r = run("bounds --model " + quote(kExampleModel) + " --vnnlib " + quote(prop));
  expect_one_error_line(r, {prop.string(), "3", "64"});
}

TEST_F(Cli, ModelWithoutProperty) {
  const CliResult r = run("bounds --model " + quote(kExampleModel));
  expect_one_error_line(r, {"--vnnlib"});
}

TEST_F(Cli, UnknownMethodIsAUsageError) {
  // Usage errors follow the same contract as every other error (README.md): one line, exit 1;
  // the allowed values come from the method's name table.
  const CliResult r = run("bounds --method bogus");
  expect_one_error_line(r, {"--method", "bogus", "ibp, crown or alpha-crown"});
  EXPECT_EQ(r.out, "");
}

TEST_F(Cli, ParseErrorsAreOneLineWithExitCodeOne) {
  for (const std::string args : {"bounds --no-such-option", "verify --bab-batch-size 0",
                                 "bounds --threads", "bogus", "", "verify --dtype float16"}) {
    SCOPED_TRACE(args);
    const CliResult r = run(args);
    expect_one_error_line(r, {});
    EXPECT_EQ(r.out, "");
  }
}

TEST_F(Cli, HelpExitsZero) {
  const CliResult r = run("verify --help");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("--bab-batch-size"), std::string::npos) << r.out;
}

// The long options "--x" a help text lists (CLI11's "  --name TYPE ..." lines).
std::set<std::string> help_options(const std::string& help) {
  std::set<std::string> out;
  static const std::regex option(R"((?:^|[ ,])(--[a-z][a-z-]*))");
  std::istringstream in(help);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (line.rfind("  -", 0) == 0 && std::regex_search(line, m, option)) out.insert(m[1]);
  }
  return out;
}

TEST_F(Cli, BothCommandsTakeTheSameOptions) {
  // One table: `bounds --help` and `verify --help` list the same options, with the names that
  // used to clash resolved (no --json / --batch, --bab-* for branch and bound).
  const CliResult b = run("bounds --help");
  const CliResult v = run("verify --help");
  ASSERT_EQ(b.exit_code, 0) << b.err;
  ASSERT_EQ(v.exit_code, 0) << v.err;
  const std::set<std::string> bounds = help_options(b.out);
  EXPECT_EQ(bounds, help_options(v.out)) << b.out << "\n---\n" << v.out;
  for (const char* name :
       {"--result", "--timeout", "--threads", "--iterations", "--bab-iterations",
        "--crown-batch-size", "--bab-batch-size", "--intermediate", "--config"}) {
    EXPECT_TRUE(bounds.count(name)) << name << "\n" << b.out;
  }
  for (const char* gone : {"--json", "--batch"}) EXPECT_FALSE(bounds.count(gone)) << gone;
}

TEST_F(Cli, ReadmeOptionTableIsTheHelp) {
  // README.md's one option table ("| `--name ...` |" rows) lists exactly the options of --help.
  std::ifstream in(kSourceDir / "README.md");
  std::set<std::string> readme;
  static const std::regex row(R"(^\| `(--[a-z][a-z-]*))");
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, row)) readme.insert(m[1]);
  }
  std::set<std::string> help = help_options(run("verify --help").out);
  help.erase("--help");
  EXPECT_EQ(readme, help);
}

TEST_F(Cli, OptionOfTheOtherCommandIsAnError) {
  expect_one_error_line(run("bounds --branching fsb"), {"--branching applies to verify only"});
  expect_one_error_line(run("bounds --bab-batch-size 8"), {"--bab-batch-size", "verify only"});
  const fs::path result = dir_ / "result.txt";
  expect_one_error_line(run("bounds --domain-groups 2"), {"--domain-groups", "verify only"});
  expect_one_error_line(run("verify --method crown --result " + quote(result)),
                        {"--method applies to bounds only"});
  EXPECT_EQ(testing::read_file(result), "error\n");
}

TEST_F(Cli, VerifyWritesErrorResultOnParseErrors) {
  for (const std::string form : {"--result ", "--result="}) {
    for (const std::string bad : {"--bab-batch-size 0", "--no-such-option", "--split sideways"}) {
      SCOPED_TRACE(form + " " + bad);
      const fs::path result = dir_ / "result.txt";
      std::remove(result.c_str());
      const CliResult r = run("verify " + bad + " " + form + quote(result));
      expect_one_error_line(r, {});
      ASSERT_TRUE(fs::exists(result));
      EXPECT_EQ(testing::read_file(result), "error\n");
    }
  }
}

TEST_F(Cli, VerifyWritesErrorResultWhenTheModelFailsToLoad) {
  const fs::path model = write("corrupt.onnx", "not an ONNX model");
  const fs::path result = dir_ / "result.txt";
  const CliResult r = run("verify --model " + quote(model) + " --vnnlib " +
                          quote(kExampleProperty) + " --result " + quote(result));
  expect_one_error_line(r, {model.string()});
  EXPECT_EQ(testing::read_file(result), "error\n");
}

// A model that reads an input only as an integer (y = x0 + float(int64(x1))) cannot be bounded
// through its Cast; with x0 fixed, verify enumerates x1's integer parts (4 points) instead, and
// --report says so.
TEST_F(Cli, VerifyEnumeratesInputsReadAsIntegers) {
  testing::OnnxBuilder b;
  b.input("x", {2}).output("y", {1});
  b.initializer("i0", at::tensor({0}, at::kLong)).initializer("i1", at::tensor({1}, at::kLong));
  b.node("x0", "Gather", {"x", "i0"}, {"x0"}, {testing::attr_int("axis", 0)});
  b.node("x1", "Gather", {"x", "i1"}, {"x1"}, {testing::attr_int("axis", 0)});
  b.node("int", "Cast", {"x1"}, {"n"}, {testing::attr_int("to", io::kOnnxInt64)});
  b.node("real", "Cast", {"n"}, {"nf"}, {testing::attr_int("to", io::kOnnxFloat)});
  b.node("sum", "Add", {"x0", "nf"}, {"y"});
  const fs::path model = write("integer_input.onnx", b.bytes());
  const std::string header =
      "(declare-const X_0 Real)\n(declare-const X_1 Real)\n(declare-const Y_0 Real)\n"
      "(assert (>= X_0 0.25))\n(assert (<= X_0 0.25))\n(assert (>= X_1 0))\n"
      "(assert (<= X_1 3.9))\n";
  for (const auto& [threshold, verdict] : {std::pair{"3.5", "unsat"}, std::pair{"3.0", "sat"}}) {
    const fs::path property =
        write("integer_input.vnnlib", header + "(assert (>= Y_0 " + threshold + "))\n");
    const fs::path result = dir_ / "result.txt";
    const fs::path report = dir_ / "report.json";
    const CliResult r = run("verify --model " + quote(model) + " --vnnlib " + quote(property) +
                            " --result " + quote(result) + " --report " + quote(report));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(testing::read_file(result).substr(0, std::string(verdict).size() + 1),
              std::string(verdict) + "\n");
    EXPECT_EQ(testing::read_json(report).value("split", ""), "enumeration");
    EXPECT_NE(r.err.find("enumeration"), std::string::npos) << r.err;
  }
}

// A model ending in Softmax with a property comparing two outputs is verified on its logits
// (--report: output_softmax_peeled); the counterexample's outputs are the model's, softmax
// values that sum to 1 and satisfy the property.
TEST_F(Cli, VerifyLeavesOutAnOutputSoftmaxForComparisons) {
  testing::OnnxBuilder b;
  b.input("x", {1, 2}).output("y", {1, 3});
  b.initializer("W", at::tensor({1.0F, 0.0F, 0.0F, 1.0F, 1.0F, 1.0F}).reshape({3, 2}));
  b.node("fc", "Gemm", {"x", "W"}, {"z"}, {testing::attr_int("transB", 1)});
  b.node("soft", "Softmax", {"z"}, {"y"}, {testing::attr_int("axis", 1)});
  const fs::path model = write("soft.onnx", b.bytes());
  const fs::path property =
      write("soft.vnnlib",
            "(declare-const X_0 Real)\n(declare-const X_1 Real)\n(declare-const Y_0 Real)\n"
            "(declare-const Y_1 Real)\n(declare-const Y_2 Real)\n(assert (>= X_0 0))\n"
            "(assert (<= X_0 1))\n(assert (>= X_1 -1))\n(assert (<= X_1 0))\n"
            "(assert (>= Y_1 Y_0))\n");
  const fs::path result = dir_ / "result.txt";
  const fs::path report = dir_ / "report.json";
  const CliResult r = run("verify --model " + quote(model) + " --vnnlib " + quote(property) +
                          " --result " + quote(result) + " --report " + quote(report));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(testing::read_json(report).value("output_softmax_peeled", false));
  const std::string text = testing::read_file(result);
  ASSERT_EQ(text.rfind("sat\n", 0), 0u) << text;
  double y[3] = {0, 0, 0};
  for (int i = 0; i < 3; ++i) {
    const std::string key = "(Y_" + std::to_string(i) + " ";
    const size_t at = text.find(key);
    ASSERT_NE(at, std::string::npos) << text;
    y[i] = std::stod(text.substr(at + key.size()));
  }
  EXPECT_NEAR(y[0] + y[1] + y[2], 1.0, 1e-6) << text;
  EXPECT_GE(y[1], y[0]) << text;
}

TEST_F(Cli, VerifyTakesTheResolvedOptions) {
  const fs::path result = dir_ / "result.txt";
  const CliResult r =
      run("verify --quiet --iterations 3 --lr 0.4 --bab-iterations 2 --bab-batch-size 8 "
          "--crown-batch-size 4 --intermediate auto_lirpa --threads 1 --timeout 60 --result " +
          quote(result));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(testing::read_file(result), "unsat\n");  // examples/README.md
}

// What branch and bound splits and the intermediate scheme of its passes are decided in one
// place (bab::splits_inputs), and --report says both: `--split input` on the digits model (64
// inputs, more than auto's 32) splits the inputs with input splitting's scheme, tight_unstable,
// as `--intermediate auto` promises; `--split auto` splits its ReLUs with auto_LiRPA's; a scheme
// given is kept.
TEST_F(Cli, SplitAndIntermediateSchemeAgree) {
  const auto report_of = [&](const std::string& args) {
    const fs::path report = dir_ / "report.json";
    std::remove(report.c_str());
    const CliResult r =
        run("verify --quiet --timeout 60 --max-rounds 1 " + args + " --report " + quote(report));
    EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.err;
    return fs::exists(report) ? testing::read_json(report) : json::object();
  };
  const json input = report_of("--split input");
  EXPECT_EQ(input.value("split", ""), "input") << input.dump();
  EXPECT_EQ(input.value("intermediate", ""), "tight_unstable") << input.dump();
  const json relu = report_of("--split auto");
  EXPECT_EQ(relu.value("split", ""), "relu") << relu.dump();
  EXPECT_EQ(relu.value("intermediate", ""), "auto_lirpa") << relu.dump();
  const json given = report_of("--split input --intermediate tight");
  EXPECT_EQ(given.value("split", ""), "input") << given.dump();
  EXPECT_EQ(given.value("intermediate", ""), "tight") << given.dump();
}

// --cuts: its counts in --report (zero where nothing was learned); refused in one line where
// the search splits the inputs, before anything runs.
TEST_F(Cli, VerifyTakesCutsAndReportsThem) {
  const fs::path report = dir_ / "report.json";
  const CliResult r = run(
      "verify --quiet --timeout 60 --max-rounds 2 --split relu --cuts --report " + quote(report));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = testing::read_json(report);
  ASSERT_TRUE(j.contains("cuts")) << j.dump();
  for (const char* key : {"checked", "learned", "pruned", "implied"}) {
    EXPECT_GE(j["cuts"].value(key, -1), 0) << key << ": " << j.dump();
  }
  const CliResult input = run("verify --quiet --timeout 60 --split input --cuts");
  EXPECT_NE(input.exit_code, 0);
  EXPECT_NE(input.err.find("--cuts: cuts are made of ReLU splits"), std::string::npos) << input.err;
  EXPECT_EQ(std::count(input.err.begin(), input.err.end(), '\n'), 1) << input.err;
}

// --memory-limit MB: taken, and given back in --report as memory.limit_bytes, with the smallest
// batch of a branch and bound (bab_min_batch; null: none ran) and memory.limited; a negative,
// malformed or overflowing value is a one-line usage error. bounds takes it as well.
TEST_F(Cli, VerifyTakesAMemoryLimitAndReportsIt) {
  const fs::path result = dir_ / "result.txt";
  const fs::path report = dir_ / "report.json";
  const CliResult r = run("verify --quiet --memory-limit 123 --timeout 60 --result " +
                          quote(result) + " --report " + quote(report));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(testing::read_file(result), "unsat\n");
  const json j = testing::read_json(report);
  ASSERT_TRUE(j.contains("bab_min_batch")) << j.dump();
  EXPECT_TRUE(j["bab_min_batch"].is_null() || j["bab_min_batch"].get<int64_t>() >= 1) << j.dump();
  EXPECT_EQ(j["memory"].value("limit_bytes", int64_t{0}), 123000000) << j.dump();
  ASSERT_TRUE(j["memory"].contains("limited")) << j.dump();
  EXPECT_FALSE(j["memory"]["limited"].get<bool>()) << j.dump();
  // The default: half of the memory available, a positive number of bytes on Linux. (`--json`
  // is the report's other name.)
  fs::remove(report);
  ASSERT_EQ(run("verify --quiet --timeout 60 --json " + quote(report)).exit_code, 0);
  EXPECT_GT(testing::read_json(report)["memory"].value("limit_bytes", int64_t{0}), 0);
  for (const std::string bad :
       {"-5", "abc", "12x", "1e30", "9223372036854775807", "--memory-limit=-1"}) {
    SCOPED_TRACE(bad);
    std::remove(result.c_str());
    const std::string args = bad.rfind("--", 0) == 0 ? bad : "--memory-limit " + bad;
    expect_one_error_line(run("verify " + args + " --result " + quote(result)), {"--memory-limit"});
    EXPECT_EQ(testing::read_file(result), "error\n");
  }
  // bounds takes it too: α-CROWN reports the intermediate starts it left out under it (none on
  // the embedded default, whose passes fit many times over) and whether it stopped at it.
  const fs::path bounds = dir_ / "bounds.json";
  ASSERT_EQ(
      run("bounds --method alpha-crown --memory-limit 1000 --result " + quote(bounds)).exit_code,
      0);
  const json rank = testing::read_json(bounds)["memory"]["ranks"][0];
  EXPECT_EQ(rank.value("starts_left_out", -1), 0) << rank.dump();
  EXPECT_FALSE(rank.value("memory_limited", true)) << rank.dump();
}

TEST_F(Cli, BoundsTakesTimeoutThreadsAndAutoIntermediate) {
  const json j = bounds_json("--method crown --timeout 100 --threads 1 --intermediate auto");
  expect_bounds_json(j, "crown", kDigitsOutputs);
  EXPECT_EQ(doubles(j["lower"]),
            doubles(bounds_json("--method crown --intermediate auto_lirpa")["lower"]));
  // `every`: CROWN rows for every neuron, α everywhere; a table like the others.
  expect_bounds_json(bounds_json("--method alpha-crown --iterations 3 --intermediate every"),
                     "alpha-crown", kDigitsOutputs);
  // `tight_unstable`: CROWN rows for the neurons IBP leaves unstable, intersected with IBP.
  expect_bounds_json(bounds_json("--method crown --intermediate tight_unstable"), "crown",
                     kDigitsOutputs);
}

TEST_F(Cli, BoundsPastItsTimeoutFails) {
  const fs::path file = dir_ / "bounds.json";
  const CliResult r = run("bounds --method alpha-crown --timeout 1e-9 --result " + quote(file));
  expect_one_error_line(r, {"timeout"});
  EXPECT_FALSE(fs::exists(file));
}

TEST_F(Cli, ConfigFileSetsOptionsAndTheCommandLineWins) {
  const fs::path config = write("run.yaml",
                                "# alpha,beta-CROWN style settings\n"
                                "method: ibp\n"
                                "dtype: float64\n"
                                "spec-parallel: false\n"
                                "crown-batch-size: 5\n");
  const json from_file = bounds_json("--config " + quote(config));
  expect_bounds_json(from_file, "ibp", kDigitsOutputs);
  EXPECT_EQ(from_file.value("dtype", ""), "float64");
  const json overridden = bounds_json("--config=" + quote(config) + " --method crown");
  expect_bounds_json(overridden, "crown", kDigitsOutputs);
  EXPECT_EQ(overridden.value("dtype", ""), "float64");
}

TEST_F(Cli, ConfigFileForVerify) {
  const fs::path result = dir_ / "result.txt";
  const fs::path config =
      write("verify.yaml",
            "bab-batch-size: 16\nquiet: true\nresult: " + result.string() + "\nbranching: babsr\n");
  const CliResult r = run("verify --config " + quote(config));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(count_lines(r.err), 1u) << r.err;  // quiet: the summary line only
  EXPECT_EQ(testing::read_file(result), "unsat\n");
}

TEST_F(Cli, ConfigFileErrors) {
  const fs::path unknown = write("unknown.yaml", "method: ibp\nbogus-key: 3\n");
  expect_one_error_line(run("bounds --config " + quote(unknown)), {"bogus-key", unknown.string()});
  const fs::path other = write("other.yaml", "branching: fsb\n");
  expect_one_error_line(run("bounds --config " + quote(other)),
                        {"branching applies to verify only", other.string()});
  const fs::path bad_value = write("bad_value.yaml", "method: bogus\n");
  expect_one_error_line(run("bounds --config " + quote(bad_value)), {"--method", "bogus"});
  const fs::path list = write("list.yaml", "method: [ibp, crown]\n");
  expect_one_error_line(run("bounds --config " + quote(list)), {"method", list.string()});
  const fs::path syntax = write("syntax.yaml", "method: ibp\n  : : [\n");
  expect_one_error_line(run("bounds --config " + quote(syntax)), {syntax.string()});
  expect_one_error_line(run("bounds --config " + quote(dir_ / "missing.yaml")), {"missing.yaml"});
  // verify writes its result file for a bad config too.
  const fs::path result = dir_ / "result.txt";
  const fs::path unknown_verify = write("unknown_verify.yaml", "bogus-key: 3\n");
  expect_one_error_line(
      run("verify --config " + quote(unknown_verify) + " --result " + quote(result)),
      {"bogus-key"});
  EXPECT_EQ(testing::read_file(result), "error\n");
}

// Every name table round-trips and a bad name lists the canonical names, from the same table the
// CLI's allowed values come from.
template <class E>
void expect_round_trip(const std::string& what) {
  for (std::string_view name : enum_names<E>()) {
    EXPECT_EQ(enum_name(parse_enum<E>(name, what)), name);
  }
  try {
    parse_enum<E>("bogus", what);
    ADD_FAILURE() << what << ": no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("unknown " + what + " 'bogus' (expected " +
                                         enum_names_text<E>() + ")"),
              std::string::npos)
        << e.what();
  }
}

// Values a hostile tester tried: each refused with one line and exit 1 (verify: `error` written).
TEST_F(Cli, OutOfRangeValuesAreRefused) {
  const fs::path result = dir_ / "result.txt";
  for (const std::string args :
       {"--timeout nan", "--timeout inf", "--timeout -1", "--seed -1", "--threads 100000",
        "--threads 2147483647", "--threads 0", "--max-rounds 18446744073709551616", "--lr nan",
        "--bab-batch-size 0"}) {
    SCOPED_TRACE(args);
    std::remove(result.c_str());
    expect_one_error_line(run("verify " + args + " --result " + quote(result)), {});
    EXPECT_EQ(testing::read_file(result), "error\n");
  }
  expect_one_error_line(run("bounds --result ''"), {"--result"});
  expect_one_error_line(run("verify --model " + quote(std::string(10000, 'm'))), {"--model"});
}

TEST_F(Cli, UnwritableResultsAreErrors) {
  expect_one_error_line(run("bounds --result /dev/full"), {"/dev/full"});
  expect_one_error_line(run("bounds --result /proc/version"), {"/proc/version"});
  // verify: the answer is printed, the file cannot take it: exit 1, the reason on stderr.
  const CliResult r = run("verify --quiet --result /dev/full");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("/dev/full"), std::string::npos) << r.err;
  EXPECT_EQ(run("verify --quiet --result /proc/version").exit_code, 1);
}

TEST_F(Cli, CudaWithoutAGpuIsOneLine) {
  if (run("bounds --device cuda").exit_code == 0) GTEST_SKIP() << "a CUDA device is usable here";
  expect_one_error_line(run("bounds --device cuda"), {"--device cuda"});
  expect_one_error_line(run("verify --device cuda"), {"--device cuda"});
}

// What a competition harness sends at its deadline: verify answers `timeout` at once.
TEST_F(Cli, TerminatedVerifyAnswersTimeout) {
  DISTCROWN_REQUIRE_FIXTURES();
  const fs::path model = testing::fixtures_dir() / "models" / "mnist_256x6.onnx";
  // VNN-COMP 2022: a timeout for alpha-beta-CROWN too (docs/mnist_fc_256x4_256x6.csv).
  const fs::path spec = testing::fixtures_dir() / "specs" / "mnist_prop_2_0.05.vnnlib";
  const fs::path result = dir_ / "result.txt";
  for (const char* signal : {"TERM", "INT"}) {
    SCOPED_TRACE(signal);
    std::remove(result.c_str());
    // The instance runs for minutes; the signal comes after 3 s, and the answer within 1 s more.
    const std::string command = "timeout -s " + std::string(signal) + " -k 2 3 " +
                                quote(std::string(DISTCROWN_CLI_PATH)) + " verify --quiet" +
                                " --timeout 300 --model " + quote(model) + " --vnnlib " +
                                quote(spec) + " --result " + quote(result);
    const CliResult r = testing::run_captured(command, dir_.path());
    EXPECT_NE(r.exit_code, 137) << "killed: no answer within 2 s of the signal";
    EXPECT_EQ(testing::read_file(result), "timeout\n") << r.err;
    EXPECT_EQ(r.out, "timeout\n");
  }
}

TEST(EnumNames, TablesRoundTripAndWrappersAgree) {
  expect_round_trip<Method>("method");
  expect_round_trip<IntermediateScheme>("scheme");
  expect_round_trip<sharding::ShardPlan>("shard plan");
  expect_round_trip<bab::Verdict>("verdict");
  expect_round_trip<bab::SplitMode>("split");
  expect_round_trip<bab::Branching>("branching");
  EXPECT_EQ(enum_names_text<Method>(), "ibp, crown or alpha-crown");
  EXPECT_EQ(parse_method("CROWN-Optimized"), Method::kAlphaCrown);  // an alias
  EXPECT_EQ(to_string(Method::kAlphaCrown), "alpha-crown");
  EXPECT_EQ(sharding::parse_shard_plan("tp-exact"), sharding::ShardPlan::kTpExact);
  EXPECT_EQ(sharding::to_string(sharding::ShardPlan::kFsdp), "fsdp");
  EXPECT_EQ(bab::to_string(bab::Verdict::kTimeout), "timeout");
  EXPECT_THROW(parse_method("bogus"), InvalidArgument);
}

TEST_F(Cli, MnistFixtureMatchesAutoLirpaCrown) {
  DISTCROWN_REQUIRE_FIXTURES();
  const fs::path fx = testing::fixtures_dir();
  const json ref = testing::read_json(fx / "refs" / "mnist_256x2_prop_0_0.03.json");
  const json j = bounds_json("--model " + quote(fx / "models" / "mnist_256x2.onnx") + " --vnnlib " +
                             quote(fx / "specs" / "mnist_prop_0_0.03.vnnlib") + " --method crown");
  expect_bounds_json(j, "crown", kDigitsOutputs);
  for (const char* side : {"lower", "upper"}) {
    const auto got = doubles(j[side]);
    const auto want = doubles(ref["crown"][side]);
    ASSERT_EQ(got.size(), want.size()) << side;
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_NEAR(got[i], want[i], std::max(1e-4 * std::abs(want[i]), 1e-5))
          << side << " output " << i;
    }
  }
}

}  // namespace
}  // namespace distcrown
