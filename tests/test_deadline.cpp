// Deadlines (util/deadline.hpp): a passed deadline stops CROWN at its first checkpoint, a deadline
// that passes during a chunked CROWN pass or α-CROWN's iterations stops them part way with
// DeadlineReached (the heartbeat counts the checkpoints each run passed), DeadlineReached thrown
// inside an autograd backward reaches the caller as itself, verify() answers `timeout` past its
// deadline, and `distcrown verify --timeout T` on a ResNet and an MLP fixture answers `timeout`
// by T + 1 s (README.md), with progress lines and its --report JSON (result, time, peak memory).
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <regex>
#include <string>
#include <thread>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>

#include "distcrown/bab/verifier.hpp"
#include "distcrown/io/problem.hpp"
#include "distcrown/methods/alpha_crown.hpp"
#include "distcrown/methods/compute_bounds.hpp"
#include "distcrown/methods/crown.hpp"
#include "distcrown/util/deadline.hpp"
#include "fixtures.hpp"
#include "io/synthetic.hpp"
#include "process.hpp"

namespace distcrown {
namespace {

namespace fs = std::filesystem;

// Counts the checkpoints passed; optionally sleeps at each, so that a short deadline passes
// after a bounded number of them whatever the machine's speed.
class CountingHeartbeat final : public Heartbeat {
 public:
  explicit CountingHeartbeat(std::chrono::milliseconds sleep = {}) : sleep_(sleep) {}
  void beat() override {
    ++beats;
    if (sleep_.count() > 0) std::this_thread::sleep_for(sleep_);
  }
  int64_t beats = 0;

 private:
  std::chrono::milliseconds sleep_;
};

// Throws DeadlineReached at every checkpoint once armed: stands for a deadline passing at a
// chosen moment.
class Tripwire final : public Heartbeat {
 public:
  void beat() override {
    if (armed) throw DeadlineReached();
  }
  bool armed = false;
};

Deadline passed() { return {Deadline::Clock::now() - std::chrono::seconds(10), 1.0}; }

InputBox box_of(int64_t in, double radius) {
  at::Generator gen = at::detail::createCPUGenerator(3);
  const at::Tensor c = at::randn({1, in}, gen, at::TensorOptions().dtype(at::kFloat));
  return {c - radius, c + radius};
}

TEST(Deadline, ExpiresAndChecks) {
  const Deadline none;
  EXPECT_FALSE(none.expired());
  EXPECT_FALSE(none.stop_at().has_value());
  EXPECT_NO_THROW(none.check());
  EXPECT_FALSE(Deadline(0).expired());
  const Deadline far(1000);
  EXPECT_FALSE(far.expired());
  ASSERT_TRUE(far.stop_at().has_value());
  EXPECT_GT(*far.stop_at(), Deadline::Clock::now());
  EXPECT_TRUE(passed().expired());
  EXPECT_THROW(passed().check(), DeadlineReached);
  // This process has run for a while (loading LibTorch, earlier tests): the deadline counted
  // from its start has less time left than one counted from now.
  EXPECT_GT(process_age_seconds(), 0.0);
  EXPECT_GT(Deadline::since_process_start(1000).elapsed(), Deadline(1000).elapsed());
  EXPECT_GT(peak_resident_bytes(), 0);
}

TEST(Deadline, PassedDeadlineStopsCrownAtTheFirstCheckpoint) {
  const BoundGraph g = io::make_random_mlp(5, 32, 3, 3, 11);
  const InputBox box = box_of(5, 0.5);
  CountingHeartbeat count;
  const BoundOptions o;
  CrownEngine engine(g, box, o, PassContext::stopping_at({passed(), &count}));
  EXPECT_THROW(engine.compute_intermediate_bounds(), DeadlineReached);
  EXPECT_EQ(count.beats, 1);
  // Without a deadline the same pass runs to the end through every checkpoint.
  CountingHeartbeat all;
  CrownEngine full(g, box, o, PassContext::stopping_at({Deadline(), &all}));
  full.compute_intermediate_bounds();
  EXPECT_TRUE(full.output_bounds().lower.defined());
  EXPECT_GT(all.beats, 10);
}

TEST(Deadline, StopsAChunkedCrownPassPartWay) {
  // One row per backward pass: the 3 hidden layers of 32 neurons take ~100 passes of several
  // nodes each. Each checkpoint sleeps 2 ms, so a 50 ms deadline passes within ~25 of them.
  const BoundGraph g = io::make_random_mlp(5, 32, 3, 3, 11);
  const InputBox box = box_of(5, 0.5);
  BoundOptions o;
  o.crown_batch_size = 1;
  o.scheme = IntermediateScheme::kTight;  // every neuron gets its own row
  CountingHeartbeat all;
  CrownEngine full(g, box, o, PassContext::stopping_at({Deadline(), &all}));
  full.compute_intermediate_bounds();
  full.output_bounds();
  ASSERT_GT(all.beats, 200);

  CountingHeartbeat slow(std::chrono::milliseconds(2));
  CrownEngine cut(g, box, o, PassContext::stopping_at({Deadline(0.05), &slow}));
  EXPECT_THROW(
      {
        cut.compute_intermediate_bounds();
        cut.output_bounds();
      },
      DeadlineReached);
  EXPECT_LT(slow.beats, all.beats / 4) << "the pass ran on past its deadline";
}

TEST(Deadline, StopsAlphaCrown) {
  const BoundGraph g = io::make_random_mlp(5, 32, 3, 3, 11);
  const InputBox box = box_of(5, 1.0);
  AlphaOptions ao;
  ao.iterations = 20;
  ao.early_stop_patience = 1000;  // every iteration runs
  CountingHeartbeat all;
  const AlphaResult full = alpha_crown(ao, PassContext::stopping_at({Deadline(), &all}), g, box);
  ASSERT_EQ(full.iterations_run, 2 * 20);  // both sides
  // Passed: stopped before any bound.
  EXPECT_THROW(alpha_crown(ao, PassContext::stopping_at({passed(), nullptr}), g, box),
               DeadlineReached);
  // Passing part way through the iterations (forward passes and autograd backwards).
  CountingHeartbeat slow(std::chrono::milliseconds(2));
  EXPECT_THROW(alpha_crown(ao, PassContext::stopping_at({Deadline(0.05), &slow}), g, box),
               DeadlineReached);
  EXPECT_LT(slow.beats, all.beats / 4) << "alpha-CROWN ran on past its deadline";
}

// PassContext::optimise_until ends the optimisation, not the run: an expired one leaves each
// side one iteration (CROWN's slopes, iteration 0) and returns its bounds, no DeadlineReached.
TEST(Deadline, OptimiseUntilStopsAlphaCrownWithItsBestBounds) {
  const BoundGraph g = io::make_random_mlp(5, 32, 3, 3, 11);
  const InputBox box = box_of(5, 1.0);
  AlphaOptions ao;
  ao.iterations = 20;
  ao.early_stop_patience = 1000;
  PassContext stop;
  stop.optimise_until = passed();
  const AlphaResult cut = alpha_crown(ao, stop, g, box);
  EXPECT_EQ(cut.iterations_run, 2);  // one per side
  const Interval crown = compute_bounds(g, box, Method::kCrown);
  EXPECT_TRUE(at::equal(cut.bounds.lower, crown.lower));
  EXPECT_TRUE(at::equal(cut.bounds.upper, crown.upper));
  const AlphaResult full = alpha_crown(ao, {}, g, box);
  EXPECT_EQ(full.iterations_run, 2 * 20);
  EXPECT_TRUE(at::all(full.bounds.lower >= cut.bounds.lower).item<bool>());
}

TEST(Deadline, ReachesTheCallerFromInsideAnAutogradBackward) {
  // The backward of an α-CROWN pass retraces the CROWN pass; its checkpoints run as autograd
  // hooks, and DeadlineReached must arrive as itself (not as a c10::Error) so that verify
  // answers `timeout`.
  const BoundGraph g = io::make_random_mlp(5, 32, 3, 3, 11);
  const InputBox box = box_of(5, 1.0);
  Tripwire wire;
  AlphaSlopes slopes(g, g.output_numel());
  c10::AutoGradMode grad_on(true);
  CrownEngine engine(g, box, BoundOptions{}, PassContext::stopping_at({Deadline(), &wire}));
  engine.set_hook(&slopes);
  engine.compute_intermediate_bounds();
  const at::Tensor lower = engine.output_bounds(at::Tensor(), true, false).lower;
  ASSERT_TRUE(lower.requires_grad());
  wire.armed = true;
  EXPECT_THROW(lower.sum().backward(), DeadlineReached);
}

TEST(Deadline, VerifyPastItsDeadlineAnswersTimeout) {
  const fs::path examples = fs::path(DISTCROWN_SOURCE_DIR) / "examples";
  const io::Problem p = io::load_problem((examples / "digits_mlp.onnx").string(),
                                         (examples / "digits_mlp_prop.vnnlib").string());
  bab::VerifyOptions o;
  // Without a deadline: unsat (examples/README.md), so the timeout below is the deadline's.
  bab::RunContext context;
  EXPECT_EQ(bab::to_string(bab::verify(o, context, p.graph, p.property).verdict), "unsat");
  context.deadline = passed();
  const bab::VerifyResult r = bab::verify(o, context, p.graph, p.property);
  EXPECT_EQ(bab::to_string(r.verdict), "timeout") << r.detail;
  EXPECT_FALSE(r.counterexample.has_value());
}

// `distcrown verify --timeout T` must answer by T + 1 s: README.md promises that the timeout
// counts from the process's start and is honoured by every phase (measured ending at most
// 0.17 s after it, docs/results.md). The wall time is taken from before the launch to after the
// exit, so it also counts the shell and the process's teardown.
constexpr double kOvershootLimitS = 1.0;

struct TimedVerify {
  testing::ProcessResult process;
  double wall_s = 0;
};

// Runs `distcrown verify` on a fixture model and spec with --timeout `timeout` (and `extra`
// options), killed (exit 137) only if no answer comes within 30 s of it.
TimedVerify timed_verify(const std::string& model, const std::string& spec, double timeout,
                         const std::string& extra, const fs::path& dir) {
  const fs::path fx = testing::fixtures_dir();
  const std::string command = "timeout -s KILL " + std::to_string(int(timeout) + 30) + " " +
                              testing::shell_quote(DISTCROWN_CLI_PATH) + " verify --model " +
                              testing::shell_quote((fx / "models" / model).string()) +
                              " --vnnlib " + testing::shell_quote((fx / "specs" / spec).string()) +
                              " --timeout " + std::to_string(timeout) + " " + extra;
  const auto start = std::chrono::steady_clock::now();
  TimedVerify t{testing::run_captured(command, dir), 0};
  t.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "  " << model << ": answered " << t.wall_s - timeout
            << " s after the timeout (wall time from launch to exit)\n";
  return t;
}

// The CLI on the ResNet fixture, whose root CROWN / α-CROWN pass takes far longer than the
// timeout: the answer `timeout` from inside that pass by T + 1 s, the progress lines, and
// --report.
TEST(Deadline, CliAnswersTimeoutInsideTheRootPassOfAResnet) {
  DISTCROWN_REQUIRE_FIXTURES();
  testing::TempDir dir;
  const fs::path result = dir.path() / "result.txt";
  const fs::path report = dir.path() / "report.json";
  const double timeout = 4;
  const TimedVerify t =
      timed_verify("cifar10_resnet_2b.onnx", "cifar10_resnet_2b_prop_1_eps_0.008.vnnlib", timeout,
                   "--result " + testing::shell_quote(result.string()) + " --report " +
                       testing::shell_quote(report.string()),
                   dir.path());
  const testing::ProcessResult& r = t.process;
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "timeout\n") << r.err;
  EXPECT_LE(t.wall_s, timeout + kOvershootLimitS) << r.err;
  EXPECT_EQ(testing::read_file(result), "timeout\n");
  // A line when each phase starts, each with the peak memory.
  EXPECT_NE(r.err.find("progress: attack, "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("progress: root CROWN + alpha-CROWN, "), std::string::npos) << r.err;
  EXPECT_TRUE(std::regex_search(r.err, std::regex(R"(progress: .*, peak memory \d+ MB)"))) << r.err;
  const nlohmann::json j = testing::read_json(report);
  EXPECT_EQ(j.value("result", ""), "timeout") << j.dump();
  // The phases stop a margin (0.15 s) before the timeout, to leave time for ending the process;
  // time_s counts from the process's start, so it lies within the wall time measured here.
  EXPECT_GE(j.value("time_s", 0.0), timeout - 0.5) << j.dump();
  EXPECT_LE(j.value("time_s", 0.0), t.wall_s) << j.dump();
  ASSERT_TRUE(j.contains("memory")) << j.dump();
  EXPECT_GT(j["memory"].value("peak_bytes", int64_t{0}), 0) << j.dump();
  EXPECT_GT(j["memory"].value("peak_tensor_bytes", int64_t{0}), 0) << j.dump();
}

// The same promise on an MLP (docs/results.md's deadline instance, not decided in 10 s): the
// root pass, then ReLU branch and bound, answer `timeout` by T + 1 s.
TEST(Deadline, CliAnswersTimeoutByTheDeadlineOnAnMlp) {
  DISTCROWN_REQUIRE_FIXTURES();
  testing::TempDir dir;
  const double timeout = 3;
  const TimedVerify t =
      timed_verify("mnist_256x6.onnx", "mnist_prop_2_0.05.vnnlib", timeout, "", dir.path());
  ASSERT_EQ(t.process.exit_code, 0) << t.process.err;
  EXPECT_EQ(t.process.out, "timeout\n") << t.process.err;
  EXPECT_LE(t.wall_s, timeout + kOvershootLimitS) << t.process.err;
}

}  // namespace
}  // namespace distcrown
