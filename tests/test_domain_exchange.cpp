// The messages of branch and bound across ranks (src/bab/domain.hpp): reports and domains survive
// the trip bit for bit, a damaged message is an error, and a round's plan takes the worst
// domains over all groups in the queue's own order and shares them out evenly.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>
#include <vector>

#include <ATen/ATen.h>

#include "distcrown/util/error.hpp"
#include "domain.hpp"

namespace distcrown::bab::detail {
namespace {

void expect_same(const at::Tensor& a, const at::Tensor& b) {
  ASSERT_EQ(a.defined(), b.defined());
  if (!a.defined()) return;
  EXPECT_EQ(a.scalar_type(), b.scalar_type());
  EXPECT_EQ(a.sizes(), b.sizes());
  EXPECT_TRUE(at::equal(a, b));
}

TEST(DomainExchange, ReportSurvivesTheTrip) {
  RoundReport r;
  r.timed_out = true;
  r.no_splittable = true;
  r.counterexample = Counterexample{{0.1, -2.5, 1e-300}, {3.0, std::numeric_limits<double>::max()}};
  r.queued = 12345;
  r.bounded = 678;
  r.candidates = {{-1.25, 7}, {-0.5, 3}, {-0.5, 9}};
  r.batch_cap = 24;
  r.memory_full = true;
  r.live_bytes = 3000000000;
  r.limit_bytes = 2000000000;
  const RoundReport back = decode_report(encode_report(r));
  EXPECT_TRUE(back.timed_out);
  EXPECT_FALSE(back.exhausted);
  EXPECT_TRUE(back.no_splittable);
  ASSERT_TRUE(back.counterexample.has_value());
  EXPECT_EQ(back.counterexample->x, r.counterexample->x);
  EXPECT_EQ(back.counterexample->y, r.counterexample->y);
  EXPECT_EQ(back.queued, 12345);
  EXPECT_EQ(back.bounded, 678);
  EXPECT_EQ(back.candidates, r.candidates);
  EXPECT_EQ(back.batch_cap, 24);
  EXPECT_TRUE(back.memory_full);
  EXPECT_EQ(back.live_bytes, 3000000000);
  EXPECT_EQ(back.limit_bytes, 2000000000);
  const RoundReport none = decode_report(encode_report(RoundReport{}));
  EXPECT_FALSE(none.counterexample.has_value());
  EXPECT_EQ(none.batch_cap, std::numeric_limits<int64_t>::max());
  EXPECT_FALSE(none.memory_full);
}

TEST(DomainExchange, DomainSurvivesTheTripBitForBit) {
  Domain d;
  for (const at::ScalarType t : {at::kFloat, at::kDouble}) {
    const auto o = at::TensorOptions().dtype(t);
    d.lower.push_back(at::randn({1, 3, 2}, o));
    d.upper.push_back(d.lower.back() + 1);
    d.alpha.push_back(at::rand({2, 1, 3, 2}, o));
    d.beta.push_back(at::rand({2, 1, 3, 2}, o));
    d.split.push_back(at::tensor({0.0, 1.0, -1.0, 0.0, 0.0, 1.0}, o).reshape({1, 3, 2}));
  }
  d.score = at::randn({12});
  d.value = -0.123456789012345678;
  d.floor = -0.25;
  d.id = 987654321;
  const Domain back = decode_domain(encode_domain(d), at::Device(at::kCPU));
  EXPECT_EQ(back.value, d.value);
  EXPECT_EQ(back.floor, d.floor);
  EXPECT_EQ(back.id, d.id);
  ASSERT_EQ(back.lower.size(), d.lower.size());
  for (size_t r = 0; r < d.lower.size(); ++r) {
    expect_same(back.lower[r], d.lower[r]);
    expect_same(back.upper[r], d.upper[r]);
    expect_same(back.alpha[r], d.alpha[r]);
    expect_same(back.beta[r], d.beta[r]);
    expect_same(back.split[r], d.split[r]);
  }
  expect_same(back.score, d.score);
  d.score = at::Tensor();  // a domain bounded without scores
  EXPECT_FALSE(decode_domain(encode_domain(d), at::Device(at::kCPU)).score.defined());
}

TEST(DomainExchange, SubBoxSurvivesTheTripBitForBit) {
  SubBox b;
  b.lower = {0.1, -0.2, 0.3, 1e-30, -4.5};
  b.upper = {0.35, 0.05, 0.55, 0.25, -4.25};
  b.value = -0.123456789012345;
  b.split_dim = 3;
  b.id = 987654321;
  b.A = {1.0 / 3, -2.0 / 7, 0.5, 1e-300, -3.25, 2.0, 0.0, -0.0, 5.5, 1.0 / 11};
  b.c = {-0.7, 1.0 / 13};
  const SubBox back = decode_box(encode_domain(b));
  EXPECT_EQ(back.value, b.value);
  EXPECT_EQ(back.split_dim, b.split_dim);
  EXPECT_EQ(back.id, b.id);
  EXPECT_EQ(back.lower, b.lower);
  EXPECT_EQ(back.upper, b.upper);
  EXPECT_EQ(back.A, b.A);
  EXPECT_EQ(back.c, b.c);
  // The root has no linear bounds yet.
  b.A.clear();
  b.c.clear();
  EXPECT_TRUE(decode_box(encode_domain(b)).A.empty());
  const std::string bytes = encode_domain(b);
  EXPECT_THROW((void)decode_box(bytes.substr(0, bytes.size() - 1)), Error);
}

TEST(DomainExchange, DamagedMessagesAreErrors) {
  Domain d;
  d.lower.push_back(at::zeros({1, 4}));
  d.upper.push_back(at::ones({1, 4}));
  d.alpha.push_back(at::zeros({1, 1, 4}));
  d.beta.push_back(at::zeros({1, 1, 4}));
  d.split.push_back(at::zeros({1, 4}));
  const std::string bytes = encode_domain(d);
  EXPECT_THROW((void)decode_domain(bytes.substr(0, bytes.size() - 1), at::Device(at::kCPU)), Error);
  EXPECT_THROW((void)decode_domain(bytes + "x", at::Device(at::kCPU)), Error);
  const std::string report = encode_report(RoundReport{});
  EXPECT_THROW((void)decode_report(report.substr(0, 3)), Error);
  const std::string moving = encode_moving({{4, bytes}, {9, "abc"}});
  const auto back = decode_moving(moving);
  ASSERT_EQ(back.size(), 2U);
  EXPECT_EQ(back[0].first, 4);
  EXPECT_EQ(back[0].second, bytes);
  EXPECT_EQ(back[1].second, "abc");
  EXPECT_THROW((void)decode_moving(moving.substr(0, moving.size() - 2)), Error);
  EXPECT_TRUE(decode_moving("").empty());
}

TEST(DomainExchange, PlanTakesTheWorstOverAllGroupsAndSharesThemOut) {
  std::vector<RoundReport> groups(2);
  groups[0].candidates = {{-3.0, 5}, {-1.0, 7}, {-0.5, 9}};
  groups[1].candidates = {{-2.0, 6}, {-2.0, 4}};
  const std::vector<Planned> plan = plan_round(groups, 4);
  ASSERT_EQ(plan.size(), 4U);
  // Worst first, ties to the lowest id: (-3,5) (-2,4) (-2,6) (-1,7); (-0.5,9) waits.
  const std::vector<int64_t> ids{5, 4, 6, 7};
  const std::vector<int> holders{0, 1, 1, 0};
  for (size_t p = 0; p < plan.size(); ++p) {
    EXPECT_EQ(plan[p].id, ids[p]);
    EXPECT_EQ(plan[p].holder, holders[p]);
    EXPECT_EQ(plan[p].bounder, holders[p]) << "each group keeps its own while it has room";
  }
  // One group holds everything: the other takes the half that does not fit.
  groups[1].candidates.clear();
  groups[0].candidates = {{-4.0, 1}, {-3.0, 2}, {-2.0, 3}, {-1.0, 4}, {-0.5, 5}};
  const std::vector<Planned> uneven = plan_round(groups, 4);
  ASSERT_EQ(uneven.size(), 4U);
  EXPECT_EQ(uneven[0].bounder, 0);
  EXPECT_EQ(uneven[1].bounder, 0);
  EXPECT_EQ(uneven[2].bounder, 1);
  EXPECT_EQ(uneven[3].bounder, 1);
  // Fewer domains than groups: some groups sit this round out.
  std::vector<RoundReport> four(4);
  four[2].candidates = {{-1.0, 3}};
  const std::vector<Planned> one = plan_round(four, 8);
  ASSERT_EQ(one.size(), 1U);
  EXPECT_EQ(one[0].bounder, 2);
  EXPECT_TRUE(plan_round(four, 0).empty());
}

TEST(DomainExchange, PlanOfOneGroupIsTheQueuesOwnOrder) {
  // At one process the plan must pop exactly what the heap pops (values with ties).
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> value(-5, 5);
  std::vector<Domain> heap;
  RoundReport only;
  for (int64_t id = 0; id < 200; ++id) {
    Domain d;
    d.value = value(rng) / 4.0;
    d.id = (id * 37) % 200;  // ids not in insertion order
    only.candidates.emplace_back(d.value, d.id);
    heap.push_back(d);
    std::push_heap(heap.begin(), heap.end(), worse_first);
  }
  const std::vector<Planned> plan = plan_round({only}, 64);
  ASSERT_EQ(plan.size(), 64U);
  for (const Planned& p : plan) {
    std::pop_heap(heap.begin(), heap.end(), worse_first);
    EXPECT_EQ(p.id, heap.back().id);
    EXPECT_EQ(p.value, heap.back().value);
    EXPECT_EQ(p.bounder, 0);
    heap.pop_back();
  }
}

}  // namespace
}  // namespace distcrown::bab::detail
