// `distcrown verify` under mpirun (issue 14): with --deterministic, the verdict, the number of
// bounded domains and the final worst bound are the same at one process and at every (ranks,
// domain groups, sharding) layout tested; a timeout in the middle of a round, groups that get no
// domain, and a rank killed by SIGKILL end every rank (the last with a non-zero exit within 30 s);
// layouts that are not built are refused once. Uses the fixtures' mnist_fc networks.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fixtures.hpp"
#include "process.hpp"

namespace distcrown {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Result = testing::ProcessResult;

const std::string kCli = DISTCROWN_CLI_PATH;
constexpr const char* kMpiEnv = "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ";

std::string problem(const std::string& model, const std::string& spec) {
  const fs::path f = testing::fixtures_dir();
  return "--model '" + (f / "models" / model).string() + "' --vnnlib '" +
         (f / "specs" / spec).string() + "'";
}

// A property that α-CROWN does not prove and branch and bound does not decide in minutes
// (mnist_256x4, image 2, ε = 0.05: a timeout in the fixtures' VNN-COMP results too).
std::string hard() { return problem("mnist_256x4.onnx", "mnist_prop_2_0.05.vnnlib"); }

struct Layout {
  int ranks = 1;
  int groups = 1;
  std::string shard = "none";
  [[nodiscard]] std::string name() const {
    return "P=" + std::to_string(ranks) + " G=" + std::to_string(groups) + " " + shard;
  }
};

class VerifyMpi : public ::testing::Test {
 protected:
  // verify at `layout` (without mpirun at one rank); the report's JSON, with the result word.
  json verify(const Layout& layout, const std::string& args, Result* out = nullptr) {
    const fs::path report = dir_.path() / "report.json";
    fs::remove(report);
    const std::string cmd = kCli + " verify " + args + " --quiet --report '" + report.string() +
                            "' --domain-groups " + std::to_string(layout.groups) + " --shard " +
                            layout.shard;
    const Result r = testing::run_captured(
        layout.ranks == 1 ? "timeout 300 " + cmd
                          : std::string(kMpiEnv) + "timeout 300 " + DISTCROWN_MPIEXEC +
                                " --oversubscribe -np " + std::to_string(layout.ranks) + " " + cmd,
        dir_.path());
    if (out != nullptr) *out = r;
    EXPECT_EQ(r.exit_code, 0) << layout.name() << "\n" << r.err;
    if (!fs::exists(report)) {
      ADD_FAILURE() << layout.name() << ": no report\n" << r.err;
      return json::object();
    }
    return testing::read_json(report);
  }

  testing::TempDir dir_;
};

TEST_F(VerifyMpi, DeterministicRunsAgreeAtEveryLayout) {
  DISTCROWN_REQUIRE_FIXTURES();
  const std::string args = hard() + " --deterministic --max-rounds 4 --bab-batch-size 8";
  const json one = verify({1, 1, "none"}, args);
  ASSERT_EQ(one["result"], "unknown") << one.dump();
  ASSERT_GT(one["domains_bounded"].get<int64_t>(), 8);
  ASSERT_FALSE(one["worst_bound"].is_null());
  const double worst = one["worst_bound"].get<double>();
  for (const Layout& layout :
       {Layout{2, 2, "none"}, Layout{2, 1, "fsdp"}, Layout{4, 4, "none"}, Layout{4, 2, "fsdp"}}) {
    SCOPED_TRACE(layout.name());
    const json j = verify(layout, args);
    EXPECT_EQ(j["result"], one["result"]);
    EXPECT_EQ(j["world_size"], layout.ranks);
    EXPECT_EQ(j["groups"], layout.groups);
    EXPECT_EQ(j["domains_bounded"], one["domains_bounded"]);
    EXPECT_NEAR(j["worst_bound"].get<double>(), worst, 1e-5 * std::max(1.0, std::abs(worst)));
    const auto per_group = j["domains_per_group"].get<std::vector<int64_t>>();
    ASSERT_EQ(per_group.size(), size_t(layout.groups));
    int64_t sum = 0;
    for (const int64_t n : per_group) sum += n;
    EXPECT_EQ(sum, j["domains_bounded"].get<int64_t>());
    if (layout.groups == 1) {
      EXPECT_EQ(j["domains_moved"], 0);
    }
    EXPECT_EQ(j["memory"]["ranks"].size(), size_t(layout.ranks));
  }
}

TEST_F(VerifyMpi, GroupsThatGetNoDomainStillFinishTheRound) {
  DISTCROWN_REQUIRE_FIXTURES();
  // One domain a round among four groups: three sit out every round.
  const std::string args = hard() + " --deterministic --max-rounds 3 --bab-batch-size 1";
  const json one = verify({1, 1, "none"}, args);
  const json four = verify({4, 4, "none"}, args);
  EXPECT_EQ(four["result"], one["result"]);
  EXPECT_EQ(four["domains_bounded"], one["domains_bounded"]);
}

TEST_F(VerifyMpi, UnsatAgreesAcrossRanks) {
  DISTCROWN_REQUIRE_FIXTURES();
  // Needs branch and bound on mnist_256x2 (unsat per the fixtures).
  const std::string args =
      problem("mnist_256x2.onnx", "mnist_prop_0_0.03.vnnlib") + " --deterministic --timeout 120";
  const json one = verify({1, 1, "none"}, args);
  ASSERT_EQ(one["result"], "unsat") << one.dump();
  const json two = verify({2, 2, "none"}, args);
  EXPECT_EQ(two["result"], "unsat");
  EXPECT_EQ(two["domains_bounded"], one["domains_bounded"]);
}

TEST_F(VerifyMpi, ATimeoutInTheMiddleOfARoundEndsEveryRankTogether) {
  DISTCROWN_REQUIRE_FIXTURES();
  for (const Layout& layout : {Layout{2, 2, "none"}, Layout{4, 2, "fsdp"}}) {
    SCOPED_TRACE(layout.name());
    Result r;
    const json j = verify(layout, hard() + " --timeout 6", &r);
    EXPECT_EQ(j["result"], "timeout");
    EXPECT_LT(j["time_s"].get<double>(), 7.0);
    EXPECT_EQ(r.out, "timeout\n");  // rank 0 alone answers
  }
}

TEST_F(VerifyMpi, AKilledRankEndsTheJobWithAnError) {
  DISTCROWN_REQUIRE_FIXTURES();
  // mpirun must notice a rank that dies without a word and end the job, not wait for it.
  const std::string script =
      std::string(kMpiEnv) + DISTCROWN_MPIEXEC + " --oversubscribe -np 2 " + kCli + " verify " +
      hard() +
      " --quiet --timeout 200 --domain-groups 2 & job=$!; sleep 6; "
      // The newest process whose command line has "<cli> verify": a rank (mpirun is older).
      // The bracket keeps the pattern from matching this script's own command line.
      "pkill -9 -n -f -- \"" +
      kCli.substr(0, kCli.size() - 1) + "[" + kCli.back() + "]" +
      " verify\"; start=$(date +%s); wait $job; rc=$?; echo \"rc=$rc waited=$(( $(date +%s) - "
      "start ))\"";
  const Result r =
      testing::run_captured("timeout 120 bash -c " + testing::shell_quote(script), dir_.path());
  const auto at = r.out.find("rc=");
  ASSERT_NE(at, std::string::npos) << r.out << r.err;
  int rc = 0;
  int waited = 0;
  ASSERT_EQ(std::sscanf(r.out.c_str() + at, "rc=%d waited=%d", &rc, &waited), 2) << r.out;
  EXPECT_NE(rc, 0) << r.err;
  EXPECT_LE(waited, 30);
}

TEST_F(VerifyMpi, LayoutsThatAreNotBuiltAreRefusedOnce) {
  const auto run = [&](const std::string& args) {
    return testing::run_captured(std::string(kMpiEnv) + "timeout 120 " + DISTCROWN_MPIEXEC +
                                     " --oversubscribe -np 2 " + kCli + " verify " + args,
                                 dir_.path());
  };
  const Result groups = run("--domain-groups 3");
  EXPECT_NE(groups.exit_code, 0);
  EXPECT_NE(groups.err.find("does not divide"), std::string::npos) << groups.err;
  const Result tp = run("--shard tp-exact");
  EXPECT_NE(tp.exit_code, 0);
  EXPECT_NE(tp.err.find("not built yet"), std::string::npos) << tp.err;
  const Result spec = run("--spec-parallel");
  EXPECT_NE(spec.exit_code, 0);
}

}  // namespace
}  // namespace distcrown
