// Two hosts on one machine (issue 45): two network namespaces joined by a veth pair (198.18.0.1
// and .2, the benchmarking range), mpirun in the first, Open MPI starting its daemon on the
// second through an rsh agent that runs it there (`ip netns exec`), TCP restricted to the subnet;
// one rank on each host. Across them: FSDP bounds bitwise equal to one process; verify with two
// domain groups, deterministic, the same search as one process; a remote rank killed mid-round, one
// stopped mid-round (the collective watchdog), and the remote host's link set down mid-round, each
// end every rank within 30 s with `error` or `timeout` in --result. Skipped, saying why, where
// namespaces cannot be made (not root, no iproute2). README "Across hosts" gives the same recipe
// for real hosts.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "fixtures.hpp"
#include "onnx_builder.hpp"
#include "process.hpp"

namespace distcrown {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Result = testing::ProcessResult;

const std::string kCli = DISTCROWN_CLI_PATH;
constexpr const char* kFirst = "198.18.0.1";
constexpr const char* kSecond = "198.18.0.2";

// True in the shell when process $p is a distcrown rank (not mpirun, not Open MPI's daemon).
constexpr const char* kIsRank = "[ \"$(cat /proc/$p/comm 2>/dev/null)\" = distcrown ]";

int shell(const std::string& command) {
  const int status = std::system(command.c_str());
  return status == -1 ? -1 : WEXITSTATUS(status);
}

// The two hosts: namespaces `a_` and `b_` (names unique to this process), the veth pair between
// them, the rsh agent and the hostfile; all removed by the destructor, with any process left in
// the namespaces.
class TwoHosts {
 public:
  explicit TwoHosts(const fs::path& dir) {
    const std::string id = std::to_string(::getpid());
    a_ = "dc" + id + "a";
    b_ = "dc" + id + "b";
    const std::string setup =
        "ip netns add " + a_ + " && ip netns add " + b_ + " && ip link add " + a_ +
        " type veth peer name " + b_ + " && ip link set " + a_ + " netns " + a_ +
        " && ip link set " + b_ + " netns " + b_ + " && ip -n " + a_ + " addr add " + kFirst +
        "/24 dev " + a_ + " && ip -n " + b_ + " addr add " + kSecond + "/24 dev " + b_ +
        " && ip -n " + a_ + " link set " + a_ + " up && ip -n " + b_ + " link set " + b_ +
        " up && ip -n " + a_ + " link set lo up && ip -n " + b_ + " link set lo up";
    made_ = shell(setup + " 2>" + testing::shell_quote((dir / "netns.txt").string())) == 0;
    if (!made_) {
      why_ = testing::read_file(dir / "netns.txt");
      return;
    }
    agent_ = dir / "agent.sh";
    // Open MPI calls it as "agent HOST COMMAND...": the command runs in that host's namespace.
    std::ofstream(agent_) << "#!/bin/sh\nhost=$1; shift\nif [ \"$host\" = " << kSecond
                          << " ]; then ns=" << b_ << "; else ns=" << a_
                          << "; fi\nexec ip netns exec $ns sh -c \"$*\"\n";
    fs::permissions(agent_, fs::perms::owner_all, fs::perm_options::add);
    hostfile_ = dir / "hosts";
    std::ofstream(hostfile_) << kFirst << " slots=1\n" << kSecond << " slots=1\n";
  }
  ~TwoHosts() {
    if (!made_) return;
    for (const std::string& ns : {a_, b_}) {
      shell("ip netns pids " + ns + " 2>/dev/null | xargs -r kill -9 2>/dev/null; ip netns del " +
            ns + " 2>/dev/null");
    }
  }
  TwoHosts(const TwoHosts&) = delete;
  TwoHosts& operator=(const TwoHosts&) = delete;

  [[nodiscard]] bool made() const { return made_; }
  [[nodiscard]] const std::string& why_not() const { return why_; }
  [[nodiscard]] const std::string& second() const { return b_; }

  /// `command` as two ranks, one on each host (mpirun in the first namespace). The daemons'
  /// connections probe an idle peer after 2 s, every 1 s, 3 times: mpirun and the remote daemon
  /// learn that the other host is gone within 5 s (Open MPI's default: 8 minutes), before a
  /// rank's watchdog aborts, which mpirun could not then pass on to the lost host.
  [[nodiscard]] std::string mpirun(const std::string& command) const {
    return std::string(testing::kMpiAsRoot) + "ip netns exec " + a_ + " " + DISTCROWN_MPIEXEC +
           " --mca plm_rsh_agent " + agent_.string() +
           " --mca btl tcp,self --mca btl_tcp_if_include 198.18.0.0/24"
           " --mca oob_tcp_if_include 198.18.0.0/24 --mca oob_tcp_keepalive_time 2"
           " --mca oob_tcp_keepalive_intvl 1 --mca oob_tcp_keepalive_probes 3 --hostfile " +
           hostfile_.string() + " -np 2 --map-by node " + command;
  }

  /// A shell command that sends `signal` (KILL, STOP) to the distcrown rank on the second host.
  [[nodiscard]] std::string signal_second_rank(const std::string& signal) const {
    return "for p in $(ip netns pids " + b_ + "); do " + kIsRank + " && kill -" + signal +
           " $p; done";
  }
  /// A shell command that takes the second host off the network.
  [[nodiscard]] std::string cut_second_link() const {
    return "ip -n " + b_ + " link set " + b_ + " down";
  }
  /// The number of distcrown processes still running on either host.
  [[nodiscard]] int ranks_left() const {
    const std::string count = "for ns in " + a_ + " " + b_ +
                              "; do for p in $(ip netns pids $ns); do " + kIsRank +
                              " && echo $p; done; done | wc -l";
    FILE* pipe = ::popen(count.c_str(), "r");
    if (pipe == nullptr) return -1;
    int n = -1;
    if (std::fscanf(pipe, "%d", &n) != 1) n = -1;
    ::pclose(pipe);
    return n;
  }

 private:
  std::string a_;
  std::string b_;
  fs::path agent_;
  fs::path hostfile_;
  bool made_ = false;
  std::string why_;
};

std::string problem(const std::string& model, const std::string& spec) {
  const fs::path f = testing::fixtures_dir();
  return "--model '" + (f / "models" / model).string() + "' --vnnlib '" +
         (f / "specs" / spec).string() + "'";
}

// mnist_256x4's hard property (a timeout in the fixtures' VNN-COMP results).
std::string hard() { return problem("mnist_256x4.onnx", "mnist_prop_2_0.05.vnnlib"); }

class TwoHostsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "network namespaces need root; not root here";
    hosts_ = std::make_unique<TwoHosts>(dir_.path());
    if (!hosts_->made()) {
      GTEST_SKIP() << "cannot make two hosts of network namespaces here: " << hosts_->why_not();
    }
    DISTCROWN_REQUIRE_FIXTURES();
  }

  // `args` of the CLI at one process, or across the two hosts; stdout, stderr, exit code.
  Result run(const std::string& args, bool across) {
    const std::string cli = kCli + " " + args;
    return testing::run_captured("timeout 300 " + (across ? hosts_->mpirun(cli) : cli),
                                 dir_.path());
  }

  // The job `args` across the hosts; `fault` (a shell command) 6 s in, mid-round. Every rank
  // must end within 30 s of it, with `error` or `timeout` in the result file, and stderr must
  // hold `says` (empty: anything).
  void expect_fault_ends_every_rank(const std::string& args, const std::string& fault,
                                    const std::string& says = "") {
    const fs::path result = dir_.path() / "fault_result.txt";
    const testing::FaultedJob f = testing::run_with_fault(
        hosts_->mpirun(kCli + " verify " + args + " --result '" + result.string() + "'"), 6, fault,
        dir_.path());
    const Result& r = f.run;
    ASSERT_TRUE(f.ran) << r.out << r.err;
    EXPECT_NE(f.exit_code, 0) << r.err;
    EXPECT_LE(f.waited_s, 30) << r.err;
    EXPECT_EQ(hosts_->ranks_left(), 0);
    const std::string answer = testing::read_file(result);
    EXPECT_TRUE(answer == "error\n" || answer == "timeout\n") << "result: '" << answer << "'\n"
                                                              << r.err;
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
  }

  testing::TempDir dir_;
  std::unique_ptr<TwoHosts> hosts_;
};

TEST_F(TwoHostsTest, FsdpBoundsAreBitwiseThoseOfOneProcess) {
  const std::string args = "bounds " + problem("mnist_256x6.onnx", "mnist_prop_2_0.05.vnnlib") +
                           " --method crown --result '" + (dir_.path() / "b.json").string() + "'";
  const Result one = run(args, false);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const json alone = testing::read_json(dir_.path() / "b.json");
  const Result two = run(args + " --shard fsdp", true);
  ASSERT_EQ(two.exit_code, 0) << two.err;
  const json across = testing::read_json(dir_.path() / "b.json");
  ASSERT_FALSE(alone["lower"].empty());
  EXPECT_EQ(across["lower"], alone["lower"]);  // bitwise: JSON writes floats round-trip exact
  EXPECT_EQ(across["upper"], alone["upper"]);
  EXPECT_EQ(across["world_size"], 2) << across.dump();
}

TEST_F(TwoHostsTest, TwoDomainGroupsSearchAsOneProcess) {
  const fs::path report = dir_.path() / "report.json";
  const std::string args = "verify " + hard() +
                           " --deterministic --max-rounds 4 --bab-batch-size 8 --quiet --report '" +
                           report.string() + "'";
  const Result one = run(args, false);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const json alone = testing::read_json(report);
  ASSERT_EQ(alone["result"], "unknown") << alone.dump();
  ASSERT_GT(alone["domains_bounded"].get<int64_t>(), 8);
  const Result two = run(args + " --domain-groups 2", true);
  ASSERT_EQ(two.exit_code, 0) << two.err;
  const json across = testing::read_json(report);
  EXPECT_EQ(across["world_size"], 2);
  EXPECT_EQ(across["groups"], 2);
  EXPECT_EQ(across["result"], alone["result"]);
  EXPECT_EQ(across["domains_bounded"], alone["domains_bounded"]);
  // 1e-5 relative: a bound's last bits depend on the batch it was bounded in.
  const double worst = alone["worst_bound"].get<double>();
  EXPECT_NEAR(across["worst_bound"].get<double>(), worst, 1e-5 * std::max(1.0, std::abs(worst)));
}

TEST_F(TwoHostsTest, ARemoteRankKilledMidRoundEndsEveryRank) {
  // Its daemon tells mpirun, which ends the rest.
  expect_fault_ends_every_rank(hard() + " --quiet --timeout 200 --domain-groups 2",
                               hosts_->signal_second_rank("KILL"));
}

TEST_F(TwoHostsTest, ARemoteRankThatStopsTakingPartEndsEveryRank) {
  // Stopped, not dead: nothing but the watchdog notices. Rank 0's ends the job 5 s into the
  // round's exchange, naming the rank.
  expect_fault_ends_every_rank(
      hard() + " --quiet --timeout 200 --domain-groups 2 --collective-timeout 5",
      hosts_->signal_second_rank("STOP"), "rank 1 did not arrive");
}

TEST_F(TwoHostsTest, ARemoteHostOffTheNetworkEndsEveryRank) {
  // At the default collective timeout: the daemons' keepalive probes find the host gone, and
  // mpirun ends the job.
  expect_fault_ends_every_rank(hard() + " --quiet --timeout 200 --domain-groups 2",
                               hosts_->cut_second_link());
}

}  // namespace
}  // namespace distcrown
