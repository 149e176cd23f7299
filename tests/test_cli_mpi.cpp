// The distcrown executable under mpirun (MPIEXEC from CMake): sharded runs give the same bounds
// as one process (FSDP bitwise, spec-parallel within 1e-6·max(1,|b|)), the JSON carries every
// rank's memory, and faults end every rank with a non-zero exit and the error printed once:
// a corrupt model on one rank, a mismatched option on one rank, an unsupported operator; and the
// tensor-parallel plans (--shard tp / tp-exact).

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fixtures.hpp"
#include "onnx_builder.hpp"
#include "process.hpp"

namespace distcrown {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kSourceDir = DISTCROWN_SOURCE_DIR;
const std::string kCli = DISTCROWN_CLI_PATH;
const std::string kExample = "--model '" + (kSourceDir / "examples/digits_mlp.onnx").string() +
                             "' --vnnlib '" +
                             (kSourceDir / "examples/digits_mlp_prop.vnnlib").string() + "'";

using Result = testing::ProcessResult;

class CliMpi : public ::testing::Test {
 protected:
  // `ranks` is the part after "mpirun": e.g. "-np 2 CLI bounds ..." or an MPMD "A : B" line.
  Result mpirun(const std::string& ranks) {
    return testing::run_captured(std::string(testing::kMpiAsRoot) + "timeout 300 " +
                                     DISTCROWN_MPIEXEC + " --oversubscribe " + ranks,
                                 dir_.path());
  }

  json bounds(int np, const std::string& args) {
    const fs::path file = dir_.path() / ("np" + std::to_string(np) + ".json");
    const Result r = mpirun("-np " + std::to_string(np) + " " + kCli + " bounds " + args +
                            " --result '" + file.string() + "'");
    EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.err;
    if (!fs::exists(file)) return json::object();
    return testing::read_json(file);
  }

  static size_t count(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  }

  testing::TempDir dir_;
};

void expect_equal_bounds(const json& want, const json& got, double rel) {
  for (const char* side : {"lower", "upper"}) {
    const auto a = want[side].get<std::vector<double>>();
    const auto b = got[side].get<std::vector<double>>();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      if (rel == 0) {
        EXPECT_EQ(a[i], b[i]) << side << " " << i;
      } else {
        EXPECT_NEAR(a[i], b[i], rel * std::max(1.0, std::abs(a[i]))) << side << " " << i;
      }
    }
  }
}

TEST_F(CliMpi, ShardedRunsMatchOneProcess) {
  std::vector<std::string> problems{kExample};
  if (testing::check_fixtures_present()) {
    const auto f = testing::fixtures_dir();
    problems.push_back("--model '" + (f / "models/mnist_256x6.onnx").string() + "' --vnnlib '" +
                       (f / "specs/mnist_prop_1_0.05.vnnlib").string() + "'");
    problems.push_back("--model '" + (f / "models/cifar10_resnet_2b.onnx").string() +
                       "' --vnnlib '" +
                       (f / "specs/cifar10_resnet_2b_prop_0_eps_0.008.vnnlib").string() + "'");
  }
  for (const std::string& p : problems) {
    SCOPED_TRACE(p);
    const json one = bounds(1, p + " --method crown");
    ASSERT_EQ(one["world_size"], 1);
    for (int np : {2, 4}) {
      const json fsdp = bounds(np, p + " --method crown --shard fsdp");
      expect_equal_bounds(one, fsdp, 0);
      EXPECT_EQ(fsdp["world_size"], np);
      EXPECT_EQ(fsdp["shard"], "fsdp");
      ASSERT_EQ(fsdp["memory"]["ranks"].size(), size_t(np));
      EXPECT_GT(fsdp["comm"]["calls"].get<int64_t>(), 0);
      // Every rank holds about 1/P of the parameters at rest.
      EXPECT_LT(fsdp["memory"]["baseline_bytes"].get<int64_t>(),
                one["memory"]["baseline_bytes"].get<int64_t>() * 6 / (int64_t{5} * np) + 4096);
      const json spec = bounds(np, p + " --method crown --shard fsdp --spec-parallel");
      expect_equal_bounds(one, spec, 1e-6);
      EXPECT_TRUE(spec["spec_parallel"].get<bool>());
    }
  }
}

// The hardening issue measured 6 of 20 bounds one float32 ulp apart between `bounds` at its
// default thread count and `mpirun -np 2 ... --shard fsdp` on a 12.6 M-parameter MLP with 3072
// inputs. Both commands now default to one intra-op thread, so the claim holds at the defaults.
// (On this project's 2-core VM the bounds of this model do not change with two threads either.)
TEST_F(CliMpi, FsdpOnAWideMlpMatchesOneProcessAtTheDefaults) {
  at::manual_seed(5);
  // 3072 -> 2048 -> 2048 -> 1024 -> 10 with ReLUs: 12.6 M parameters, intermediate CROWN passes.
  testing::OnnxBuilder b;
  b.input("x", {1, 3072}).output("y", {1, 10});
  const std::vector<int64_t> widths{3072, 2048, 2048, 1024, 10};
  std::string prev = "x";
  for (size_t k = 0; k + 1 < widths.size(); ++k) {
    const std::string w = "W" + std::to_string(k);
    const std::string bias = "b" + std::to_string(k);
    b.initializer(w, at::randn({widths[k + 1], widths[k]}) / std::sqrt(double(widths[k])));
    b.initializer(bias, at::randn({widths[k + 1]}) * 0.1);
    const std::string out = k + 2 == widths.size() ? "y" : "h" + std::to_string(k);
    b.node("fc" + std::to_string(k), "Gemm", {prev, w, bias}, {out},
           {testing::attr_int("transB", 1)});
    prev = out;
    if (k + 2 < widths.size()) {
      b.node("relu" + std::to_string(k), "Relu", {out}, {"r" + std::to_string(k)});
      prev = "r" + std::to_string(k);
    }
  }
  const fs::path model = testing::write_file(dir_ / "wide.onnx", b.bytes());
  std::string prop;
  for (int i = 0; i < 3072; ++i) prop += "(declare-const X_" + std::to_string(i) + " Real)\n";
  for (int j = 0; j < 10; ++j) prop += "(declare-const Y_" + std::to_string(j) + " Real)\n";
  const at::Tensor centre = at::rand({3072});
  for (int i = 0; i < 3072; ++i) {
    const double c = centre[i].item<double>();
    prop += "(assert (>= X_" + std::to_string(i) + " " + std::to_string(c - 0.01) +
            "))\n(assert (<= X_" + std::to_string(i) + " " + std::to_string(c + 0.01) + "))\n";
  }
  prop += "(assert (>= Y_0 Y_1))\n";
  const fs::path spec = testing::write_file(dir_ / "wide.vnnlib", prop);
  const std::string files = "--model '" + model.string() + "' --vnnlib '" + spec.string() + "'";
  const fs::path alone = dir_ / "alone.json";
  const Result r = testing::run_captured(
      kCli + " bounds " + files + " --result '" + alone.string() + "'", dir_.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json fsdp = bounds(2, files + " --shard fsdp");
  expect_equal_bounds(testing::read_json(alone), fsdp, 0);
}

TEST_F(CliMpi, CorruptModelOnOneRankStopsEveryRank) {
  const std::string good = kSourceDir / "examples/digits_mlp.onnx";
  const std::string bytes = testing::read_file(good);
  const fs::path bad =
      testing::write_file(dir_.path() / "bad.onnx", bytes.substr(0, bytes.size() / 2));
  const std::string prop = (kSourceDir / "examples/digits_mlp_prop.vnnlib").string();
  const Result r =
      mpirun("-np 1 " + kCli + " bounds --model '" + good + "' --vnnlib '" + prop + "' : -np 1 " +
             kCli + " bounds --model '" + bad.string() + "' --vnnlib '" + prop + "'");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(count(r.err, "distcrown: error:"), 1u) << r.err;
  EXPECT_NE(r.err.find("rank 1: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("bad.onnx"), std::string::npos) << r.err;
}

TEST_F(CliMpi, MismatchedOptionsAreRefused) {
  const Result r = mpirun("-np 1 " + kCli + " bounds --method crown : -np 1 " + kCli +
                          " bounds --method crown --crown-batch-size 3");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(count(r.err, "distcrown: error:"), 1u) << r.err;
  EXPECT_NE(r.err.find("different model, property or options"), std::string::npos) << r.err;
}

TEST_F(CliMpi, UsageErrorsArePrintedOnce) {
  for (const std::string args : {"bounds --method bogus", "bounds --branching fsb"}) {
    SCOPED_TRACE(args);
    const Result r = mpirun("-np 2 " + kCli + " " + args);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_EQ(count(r.err, "distcrown: error:"), 1u) << r.err;
  }
}

TEST_F(CliMpi, UnsupportedOperatorOnEveryRank) {
  testing::OnnxBuilder b;
  b.input("x", {1, 4}).output("y");
  b.node("hard", "Hardmax", {"x"}, {"y"});
  const fs::path model = testing::write_file(dir_.path() / "hardmax.onnx", b.bytes());
  std::string prop =
      "(declare-const X_0 Real)(declare-const X_1 Real)(declare-const X_2 Real)"
      "(declare-const X_3 Real)(declare-const Y_0 Real)(declare-const Y_1 Real)"
      "(declare-const Y_2 Real)(declare-const Y_3 Real)";
  for (int i = 0; i < 4; ++i) {
    prop +=
        "(assert (>= X_" + std::to_string(i) + " 0))(assert (<= X_" + std::to_string(i) + " 1))";
  }
  prop += "(assert (>= Y_0 Y_1))";
  const fs::path spec = testing::write_file(dir_.path() / "p.vnnlib", prop);
  const Result r = mpirun("-np 2 " + kCli + " bounds --model '" + model.string() + "' --vnnlib '" +
                          spec.string() + "'");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(count(r.err, "distcrown: error:"), 1u) << r.err;
  EXPECT_NE(r.err.find("Hardmax"), std::string::npos) << r.err;
}

// Tensor parallelism (--shard tp / tp-exact): the plan is printed, tp-exact gives one process's
// bounds up to rounding, and spec-parallel cannot be combined with it.
TEST_F(CliMpi, TensorParallelRuns) {
  std::vector<std::string> problems{kExample};
  if (testing::check_fixtures_present()) {
    const auto f = testing::fixtures_dir();
    problems.push_back("--model '" + (f / "models/mnist_256x6.onnx").string() + "' --vnnlib '" +
                       (f / "specs/mnist_prop_1_0.05.vnnlib").string() + "'");
  }
  for (const std::string& p : problems) {
    SCOPED_TRACE(p);
    const json one = bounds(1, p);
    const json exact = bounds(2, p + " --shard tp-exact");
    EXPECT_EQ(exact.value("shard", ""), "tp-exact");
    expect_equal_bounds(one, exact, 1e-5);
    const Result r = mpirun("-np 2 " + kCli + " bounds " + p + " --shard tp");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(count(r.out, "tensor-parallel plan over 2 rank(s)"), 1U) << r.out;
  }
  const Result refused = mpirun("-np 2 " + kCli + " bounds --shard tp --spec-parallel");
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find("cannot be combined"), std::string::npos) << refused.err;
}

}  // namespace
}  // namespace distcrown
