// ReLU branch and bound (bab::relu_bab): rounds that prove a true property α-CROWN cannot, every
// branching heuristic, joined disjuncts, an unsplit Sigmoid, deterministic runs, the worst bound
// never falling, and the memory budget.

#include "bab_testing.hpp"

namespace distcrown {
namespace {

using namespace bab_testing;
using testing::fmt;

TEST(ReluBab, ProvesATruePropertyInRounds) {
  const HardProperty h = hard_property(0.5);
  ASSERT_LT(h.alpha_lower, h.rhs) << "alpha-CROWN proves it at the root: not a BaB test";
  ASSERT_LT(h.rhs, h.minimum);
  bab::VerifyOptions o;
  o.timeout_s = 30;
  o.split = bab::SplitMode::kRelu;
  const bab::VerifyResult r = bab::verify(h.net.graph, h.property, o);
  EXPECT_NE(bab::to_string(r.verdict), "sat")
      << "a counterexample below the sampled minimum " << h.minimum << ": "
      << (r.counterexample ? r.counterexample->y[0] : 0.0);
  EXPECT_EQ(bab::to_string(r.verdict), "unsat")
      << r.detail << " (alpha lower " << h.alpha_lower << ", rhs " << h.rhs << ", min " << h.minimum
      << ")";
  // Straight through relu_bab: proved, after at least one round.
  const auto objs = objectives(h.property.cases[0], 1);
  const bab::Deadline deadline(30);
  const bab::BabResult b = bab::relu_bab(bab::BabOptions{}, context_of(deadline), h.net.graph,
                                         {h.property.cases[0], objs[0], objs});
  EXPECT_EQ(status(b), "proved") << b.reason;
  EXPECT_GE(b.rounds, 1);
  EXPECT_GE(b.domains_bounded, 3);
}

// A search that times out leaves its queue to the caller's Leftovers (freed after the answer);
// one that proves leaves nothing.
TEST(ReluBab, ATimedOutSearchLeavesItsQueueToTheCaller) {
  const HardProperty h = hard_property(0.5);
  const auto objs = objectives(h.property.cases[0], 1);
  bab::Leftovers leftovers;
  bab::RunContext context = context_of(bab::Deadline(30));
  context.leftovers = &leftovers;
  const bab::BabResult proved =
      bab::relu_bab(bab::BabOptions{}, context, h.net.graph, {h.property.cases[0], objs[0], objs});
  ASSERT_EQ(status(proved), "proved") << proved.reason;
  EXPECT_EQ(leftovers.size(), 0U);
  context.deadline = bab::Deadline(1e-9);  // expired before the first pass
  const bab::BabResult late =
      bab::relu_bab(bab::BabOptions{}, context, h.net.graph, {h.property.cases[0], objs[0], objs});
  ASSERT_EQ(status(late), "timeout") << late.reason;
  EXPECT_EQ(leftovers.size(), 1U);
}

// Each branching heuristic (greedy BaBSR, FSB) with either reduction proves it, in rounds.
TEST(ReluBab, EveryBranchingProvesIt) {
  const HardProperty h = hard_property(0.5);
  ASSERT_LT(h.alpha_lower, h.rhs) << "alpha-CROWN proves it at the root: not a BaB test";
  const auto objs = objectives(h.property.cases[0], 1);
  for (const bab::Branching branching : {bab::Branching::kBabsr, bab::Branching::kFsb}) {
    for (const bab::BranchingReduce reduce :
         {bab::BranchingReduce::kMin, bab::BranchingReduce::kMax}) {
      bab::BabOptions o;
      o.branching = branching;
      o.branching_reduce = reduce;
      const bab::Deadline deadline(30);
      const bab::BabResult b =
          bab::relu_bab(o, context_of(deadline), h.net.graph, {h.property.cases[0], objs[0], objs});
      EXPECT_EQ(status(b), "proved") << int(branching) << "/" << int(reduce) << ": " << b.reason;
      EXPECT_GE(b.rounds, 1);
    }
  }
}

// Two disjuncts left open by α-CROWN (y ≤ rhs, and 2y ≤ 2·rhs − 0.01 as its own row), searched
// joined (one tree, a domain done when both are impossible on it) and each in turn: both unsat,
// the joined search bounding domains of its own.
TEST(ReluBab, JoinedDisjunctsAreProvedTogether) {
  const HardProperty h = hard_property(0.5);
  ASSERT_LT(h.alpha_lower, h.rhs);
  const auto p = property_of(h.box, 1, {{{{{1.0}, h.rhs}}}, {{{{2.0}, 2 * h.rhs - 0.01}}}});
  for (const auto mode : {bab::DisjunctSearch::kJoined, bab::DisjunctSearch::kEach}) {
    SCOPED_TRACE(std::string(enum_name(mode)));
    bab::VerifyOptions o;
    o.timeout_s = 60;
    o.split = bab::SplitMode::kRelu;
    o.bab.disjuncts = mode;
    const bab::VerifyResult r = bab::verify(h.net.graph, p, o);
    EXPECT_EQ(bab::to_string(r.verdict), "unsat") << r.detail;
    EXPECT_GE(r.domains_bounded, 3);
  }
  // Straight through relu_bab with the joined objective: proved in rounds.
  const auto objs = objectives(p.cases[0], 1);
  const bab::Objective joined = bab::join_disjuncts(objs);
  const bab::Deadline deadline(60);
  const bab::BabResult b = bab::relu_bab(bab::BabOptions{}, context_of(deadline), h.net.graph,
                                         {p.cases[0], joined, objs});
  EXPECT_EQ(status(b), "proved") << b.reason;
  EXPECT_GE(b.rounds, 1);
}

// Branch and bound on a network with a Sigmoid between ReLU layers: ReLUs and the Sigmoid's
// inputs (split at points, relu_layout.hpp's general nodes) compete in one ranking; the rounds
// run, and the bound they prove lies between α-CROWN's and the sampled minimum.
TEST(ReluBab, RunsRoundsThroughASigmoid) {
  at::Generator gen = at::detail::createCPUGenerator(5);
  testing::OnnxBuilder b;
  b.input("x", {1, 5}).output("y", {1, 1});
  const std::vector<std::pair<int64_t, int64_t>> dims{{20, 5}, {20, 20}, {20, 20}, {1, 20}};
  for (size_t i = 0; i < dims.size(); ++i) {
    const auto [out, in] = dims[i];
    b.initializer("W" + std::to_string(i),
                  at::randn({out, in}, gen) * (1.5 / std::sqrt(double(in))));
    b.initializer("b" + std::to_string(i), at::randn({out}, gen) * 0.1);
  }
  const auto gemm = [&](int i, const std::string& x, const std::string& y) {
    const std::string k = std::to_string(i);
    b.node("fc" + k, "Gemm", {x, "W" + k, "b" + k}, {y}, {testing::attr_int("transB", 1)});
  };
  gemm(0, "x", "h0");
  b.node("relu0", "Relu", {"h0"}, {"a0"});
  gemm(1, "a0", "h1");
  b.node("sig", "Sigmoid", {"h1"}, {"a1"});
  gemm(2, "a1", "h2");
  b.node("relu2", "Relu", {"h2"}, {"a2"});
  gemm(3, "a2", "y");
  const BoundGraph g = io::load_onnx_bytes(b.bytes(), "relu_sigmoid.onnx");
  const InputBox box = box_around(gen, 5, 1.0);
  const OpenProperty open = open_property(g, box, gen, 0.5);
  const double alpha_lower = open.alpha_lower;
  const double minimum = open.minimum;
  const double rhs = open.rhs;
  ASSERT_LT(alpha_lower, minimum);
  const io::VnnlibProperty& p = open.property;
  const auto objs = objectives(p.cases[0], 1);
  bab::BabOptions o;
  o.deterministic = true;
  o.max_rounds = 3;
  o.batch = 4;
  const bab::Deadline deadline(0);
  const bab::BabResult r = bab::relu_bab(o, context_of(deadline), g, {p.cases[0], objs[0], objs});
  EXPECT_NE(status(r), "falsified") << "the property holds below the sampled minimum";
  EXPECT_GE(r.rounds, 1) << status(r) << ": " << r.reason;
  EXPECT_GT(r.domains_bounded, 1);
  // Stopped by the round limit, the search leaves its worst domain value, lb(Y_0) − rhs: rhs plus
  // it is the lower bound of Y_0 over the box that the rounds proved. Sound, it lies at or below
  // the sampled minimum; and the rounds refine α-CROWN's root bound, never loosen it.
  ASSERT_EQ(status(r), "unknown") << r.reason;
  const double proved = rhs + r.worst_value;
  EXPECT_LE(proved, minimum + kTol * std::max(1.0, std::abs(minimum)))
      << "bound " << fmt(proved) << " above the sampled minimum " << fmt(minimum);
  EXPECT_GE(proved, alpha_lower - kTol * std::max(1.0, std::abs(alpha_lower)))
      << "bound " << fmt(proved) << " below alpha-CROWN's root bound " << fmt(alpha_lower);
}

TEST(ReluBab, DeterministicRunsAgree) {
  const HardProperty h = hard_property(0.95);
  ASSERT_LT(h.alpha_lower, h.rhs);
  const auto objs = objectives(h.property.cases[0], 1);
  bab::BabOptions o;
  o.deterministic = true;
  o.max_rounds = 3;
  o.batch = 4;
  const auto run = [&] {
    const bab::Deadline deadline(0);
    return bab::relu_bab(o, context_of(deadline), h.net.graph,
                         {h.property.cases[0], objs[0], objs});
  };
  const bab::BabResult a = run();
  const bab::BabResult b = run();
  EXPECT_NE(status(a), "falsified");
  EXPECT_NE(status(a), "timeout");
  EXPECT_LE(a.rounds, 3);
  EXPECT_GE(a.rounds, 1) << "decided at the root: the comparison covers no branching";
  EXPECT_EQ(status(a), status(b));
  EXPECT_EQ(a.rounds, b.rounds);
  EXPECT_EQ(a.domains_bounded, b.domains_bounded);
  EXPECT_EQ(a.worst_value, b.worst_value);
  EXPECT_EQ(a.max_queue, b.max_queue);
}

// Children are never looser than their parent (a child's value is floored at its parent's), so
// the worst value left can only rise from one round to the next: deterministic runs stopped
// after 1, 2, ... rounds are prefixes of one search. With fixed and refreshed intermediate
// bounds, which must both keep the property unfalsified.
TEST(ReluBab, WorstBoundNeverFallsFromRoundToRound) {
  const HardProperty h = hard_property(0.95);
  ASSERT_LT(h.alpha_lower, h.rhs);
  const auto objs = objectives(h.property.cases[0], 1);
  for (const auto mode : {bab::BabIntermediate::kFixed, bab::BabIntermediate::kRefresh}) {
    SCOPED_TRACE(std::string(enum_name(mode)));
    bab::BabOptions o;
    o.deterministic = true;
    o.batch = 2;
    o.intermediate = mode;
    double last = -std::numeric_limits<double>::infinity();
    int rounds = 0;
    for (int64_t k = 1; k <= 5; ++k) {
      o.max_rounds = k;
      const bab::Deadline deadline(0);
      const bab::BabResult r =
          bab::relu_bab(o, context_of(deadline), h.net.graph, {h.property.cases[0], objs[0], objs});
      ASSERT_NE(status(r), "falsified");
      if (status(r) != "unknown") break;  // proved within k rounds
      EXPECT_GE(r.worst_value, last) << "after " << k << " rounds";
      last = r.worst_value;
      ++rounds;
    }
    EXPECT_GE(rounds, 2) << "decided too early to compare rounds";
  }
}

// The memory limit (RunContext::memory_limit_bytes) against the accountant's live tensor bytes.
// A search of batch 64 and 6 rounds is first run under a limit it never nears, measuring its
// peak above what was live before it; a quarter of that as the limit's room must shrink the
// batch, and the search must still not falsify the true property (it may end unknown at the
// limit, after its rounds).
class ReluBabMemory : public ::testing::Test {
 protected:
  void SetUp() override { memory::install_counting_allocator(); }

  // Under the limit limit_.
  bab::BabResult run(const bab::BabOptions& o) const {
    bab::RunContext context = context_of(bab::Deadline(0));
    context.memory_limit_bytes = limit_;
    return bab::relu_bab(o, context, h_.net.graph, {h_.property.cases[0], objs_[0], objs_});
  }

  int64_t limit_ = 0;

  HardProperty h_ = hard_property(0.95);
  std::vector<bab::Objective> objs_ = objectives(h_.property.cases[0], 1);
};

bool memory_reason(const bab::BabResult& r) {
  return r.reason.find("memory limit reached: ") != std::string::npos &&
         r.reason.find(" MB live, limit ") != std::string::npos;
}

TEST_F(ReluBabMemory, ATightLimitShrinksTheBatch) {
  ASSERT_LT(h_.alpha_lower, h_.rhs);
  bab::BabOptions o;
  o.batch = 64;
  o.max_rounds = 6;
  const int64_t live = memory::live_bytes();
  limit_ = live + (int64_t{1} << 30);
  memory::reset_peak();
  const bab::BabResult free = run(o);
  const int64_t cost = memory::peak_bytes() - live;
  ASSERT_NE(status(free), "falsified");
  ASSERT_GE(free.rounds, 3) << status(free) << ": " << free.reason;
  EXPECT_EQ(free.min_batch, 64);
  EXPECT_FALSE(free.memory_limited);
  ASSERT_GT(cost, 0);

  limit_ = memory::live_bytes() + cost / 4;
  const bab::BabResult tight = run(o);
  EXPECT_NE(status(tight), "falsified") << "the property holds below the sampled minimum";
  EXPECT_GE(tight.rounds, 1) << status(tight) << ": " << tight.reason;
  EXPECT_GE(tight.min_batch, 1);
  EXPECT_LT(tight.min_batch, 64) << status(tight) << ": " << tight.reason;
  EXPECT_TRUE(tight.memory_limited);
  if (status(tight) == "unknown" && tight.rounds < 6) {
    EXPECT_TRUE(memory_reason(tight)) << tight.reason;
  }
}

TEST_F(ReluBabMemory, ALimitBelowWhatIsLiveStopsUnknown) {
  ASSERT_LT(h_.alpha_lower, h_.rhs);
  for (const bool deterministic : {false, true}) {
    SCOPED_TRACE(deterministic ? "deterministic" : "adaptive");
    bab::BabOptions o;
    o.deterministic = deterministic;
    limit_ = 1;  // the queued root alone is more
    const bab::BabResult r = run(o);
    EXPECT_EQ(status(r), "unknown");
    EXPECT_TRUE(memory_reason(r)) << r.reason;
    EXPECT_TRUE(r.memory_limited);
    EXPECT_EQ(r.rounds, 0);
    EXPECT_EQ(r.min_batch, 0);
  }
  bab::BabOptions o;
  limit_ = -1;
  EXPECT_THROW((void)run(o), InvalidArgument);
}

// Deterministic: the batch never adapts. Under a limit it never nears, the search is the one
// without a limit; under a tight one, every round it runs has the full batch, and it ends
// unknown at the limit or does the same work.
TEST_F(ReluBabMemory, DeterministicNeverResizes) {
  ASSERT_LT(h_.alpha_lower, h_.rhs);
  bab::BabOptions o;
  o.deterministic = true;
  o.batch = 8;
  o.max_rounds = 4;
  const int64_t live = memory::live_bytes();
  limit_ = live + (int64_t{1} << 30);
  memory::reset_peak();
  const bab::BabResult free = run(o);
  const int64_t cost = memory::peak_bytes() - live;
  ASSERT_NE(status(free), "falsified");
  ASSERT_GE(free.rounds, 2) << status(free) << ": " << free.reason;
  EXPECT_EQ(free.min_batch, 8);
  EXPECT_FALSE(free.memory_limited);
  ASSERT_GT(cost, 0);

  limit_ = memory::live_bytes() + cost / 2;
  const bab::BabResult tight = run(o);
  EXPECT_NE(status(tight), "falsified");
  if (tight.rounds > 0) {
    EXPECT_EQ(tight.min_batch, 8);
  }
  if (tight.memory_limited) {
    EXPECT_EQ(status(tight), "unknown");
    EXPECT_TRUE(memory_reason(tight)) << tight.reason;
    EXPECT_LE(tight.rounds, free.rounds);
  } else {
    EXPECT_EQ(status(tight), status(free));
    EXPECT_EQ(tight.rounds, free.rounds);
    EXPECT_EQ(tight.domains_bounded, free.domains_bounded);
    EXPECT_EQ(tight.worst_value, free.worst_value);
  }
}

}  // namespace
}  // namespace distcrown
