// Objectives (bab/objective.hpp): a joined objective's value, open rows and margins.

#include "bab_testing.hpp"

namespace distcrown {
namespace {

using namespace bab_testing;

// A joined objective: a domain's value is the smallest of its disjuncts' values (each the
// largest of its rows' lb − rhs), its open rows those of disjuncts not proved, and a concrete
// output's margin the smallest disjunct margin.
TEST(Objective, JoinedValueIsTheWorstDisjunct) {
  const auto obj = [](const std::vector<double>& c, const std::vector<double>& rhs) {
    const auto K = int64_t(rhs.size());
    return bab::Objective{at::tensor(c, at::kDouble).reshape({K, -1}).to(at::kFloat),
                          at::tensor(rhs, at::kDouble),
                          {},
                          {}};
  };
  // Disjunct 0: one row (y0 ≤ 0); disjunct 1: two rows (y1 ≤ 1 and y0 + y1 ≤ 0.5).
  const bab::Objective j = bab::join_disjuncts({obj({1, 0}, {0.0}), obj({0, 1, 1, 1}, {1.0, 0.5})});
  ASSERT_EQ(j.disjunct_rows, (std::vector<int64_t>{1, 2}));
  // lower bounds of the three rows for two domains.
  const at::Tensor lower =
      at::tensor({0.25, 0.5, 0.25, -1.0, 0.75, 1.0}, at::kFloat).reshape({2, 3});
  const at::Tensor v = bab::domain_values(j, lower);
  // Domain 0: min(0.25, max(-0.5, -0.25)) = -0.25; domain 1: min(-1, max(-0.25, 0.5)) = -1.
  EXPECT_DOUBLE_EQ(v[0].item<double>(), -0.25);
  EXPECT_DOUBLE_EQ(v[1].item<double>(), -1.0);
  const at::Tensor open = bab::open_rows(j, lower);
  EXPECT_TRUE(
      at::equal(open, at::tensor({0.0, 1.0, 1.0, 1.0, 0.0, 0.0}, at::kFloat).reshape({2, 3})));
  // y = (0.5, 0.1): no disjunct holds (y0 > 0; y0 + y1 = 0.6 > 0.5); y = (0.5, −0.2):
  // disjunct 1 holds (−0.2 ≤ 1, 0.3 ≤ 0.5).
  const at::Tensor y = at::tensor({0.5, 0.1, 0.5, -0.2}, at::kDouble).reshape({2, 2});
  const at::Tensor m = bab::margins(j, y);
  EXPECT_GT(m[0].item<double>(), 0);
  EXPECT_LE(m[1].item<double>(), 0);
  // One disjunct alone keeps its old meaning: the largest row value.
  const bab::Objective single = obj({0, 1, 1, 1}, {1.0, 0.5});
  EXPECT_DOUBLE_EQ(bab::domain_values(single, lower.slice(1, 1, 3))[1].item<double>(), 0.5);
  EXPECT_TRUE(at::equal(bab::open_rows(single, lower.slice(1, 1, 3)), at::ones({2, 2})));
}

// A strict row (y0 < y1) is not held where it holds with equality: a counterexample on its
// boundary is refused; the same row written non-strict (y0 <= y1) accepts it. Joined or not.
TEST(Objective, AStrictRowHeldWithEqualityIsNoCounterexample) {
  const io::OutputConjunction strict{{{{1.0, -1.0}, 0.0, true}}};
  const io::OutputConjunction loose{{{{1.0, -1.0}, 0.0, false}}};
  const at::Tensor y = at::tensor({0.25, 0.25, 0.0, 0.5}, at::kDouble).reshape({2, 2});
  const bab::Objective s = bab::make_objective(strict, 2, at::kFloat);
  EXPECT_GT(bab::margins(s, y)[0].item<double>(), 0);  // y0 = y1
  EXPECT_LT(bab::margins(s, y)[1].item<double>(), 0);  // y0 < y1
  EXPECT_LE(bab::margins(bab::make_objective(loose, 2, at::kFloat), y)[0].item<double>(), 0);
  const bab::Objective joined =
      bab::join_disjuncts({s, bab::make_objective(strict, 2, at::kFloat)});
  EXPECT_GT(bab::margins(joined, y)[0].item<double>(), 0);
}

}  // namespace
}  // namespace distcrown
