// io::product_problem: a VNN-LIB 2.0 property over two copies of one model, with an equality and
// an order between their inputs, as one graph over the free inputs: its forward pass is the
// copies' outputs and the remaining relation; the box and the rows are those of the declared
// property; a counterexample maps back to the declared elements; networks that are not copies are
// refused.
#include <gtest/gtest.h>

#include <string>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "distcrown/io/problem.hpp"
#include "distcrown/io/vnnlib.hpp"
#include "distcrown/util/error.hpp"
#include "ops/relu.hpp"
#include "random_net.hpp"

namespace distcrown::io {
namespace {

// One load of the same model (fixed seed): 2 inputs, 8 hidden ReLUs, 2 outputs.
BoundGraph model() {
  testing::Rng rng(7);
  testing::Net n({1, 2}, rng);
  return n.finish(n.linear(n.relu(n.linear(n.input(), 8)), 2));
}

const char* kMonotone = R"((vnnlib-version <2.0>)
(declare-network f (declare-input X_f real [1, 2]) (declare-output Y_f real [2]))
(declare-network g (equal-to f) (declare-input X_g real [1, 2]) (declare-output Y_g real [2]))
(assert (and (<= -1 X_f[0, 0]) (<= X_f[0, 0] 1) (<= 0 X_f[0, 1]) (<= X_f[0, 1] 0.5)))
(assert (<= X_f[0, 0] X_g[0, 0]))
(assert (<= X_g[0, 0] 1))
(assert (== X_g[0, 1] X_f[0, 1]))
(assert (Y_f[1] < Y_g[1]))
)";

TEST(Product, TwoCopiesWithAnEqualityAndAnOrderAreOneGraph) {
  const VnnlibProperty p = parse_vnnlib_string(kMonotone, "mono");
  ASSERT_TRUE(needs_product(p));
  std::vector<BoundGraph> copies;
  copies.push_back(model());
  copies.push_back(model());
  const Problem q = product_problem(std::move(copies), p);
  check_fits(q.graph, q.property);
  // Free inputs: X_f[0,0], X_f[0,1] (= X_g[0,1]), X_g[0,0]; outputs Y_f, Y_g, X_f[0,0] − X_g[0,0].
  EXPECT_EQ(q.graph.input_numel(), 3);
  EXPECT_EQ(q.graph.output_numel(), 5);
  EXPECT_EQ(q.property.lowered_inputs, (std::vector<int64_t>{0, 1, 2, 1}));
  EXPECT_FALSE(needs_product(q.property));
  ASSERT_EQ(q.property.cases.size(), 1u);
  const VnnlibCase& c = q.property.cases[0];
  EXPECT_EQ(c.input_lower, (std::vector<double>{-1, 0, std::nextafter(-1.0, -2.0)}));
  EXPECT_EQ(c.input_upper, (std::vector<double>{1, 0.5, 1}));
  ASSERT_EQ(c.disjuncts.size(), 1u);
  const auto& rows = c.disjuncts[0].constraints;
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].coeffs, (std::vector<double>{0, 1, 0, -1, 0}));  // Y_f[1] − Y_g[1] < 0
  EXPECT_TRUE(rows[0].strict);
  EXPECT_EQ(rows[1].coeffs, (std::vector<double>{0, 0, 0, 0, 1}));  // X_f[0,0] − X_g[0,0] <= 0
  EXPECT_EQ(rows[1].rhs, 0.0);
  EXPECT_FALSE(rows[1].strict);
  // The product's forward pass is each copy's on its own input, and the relation.
  const BoundGraph one = model();
  at::Generator gen = at::detail::createCPUGenerator(3);
  const at::Tensor z = at::rand({16, 3}, gen, at::kFloat) - 0.5;
  c10::NoGradGuard no_grad;
  const at::Tensor y = q.graph.forward(z);
  const at::Tensor xf = at::stack({z.select(1, 0), z.select(1, 1)}, 1);
  const at::Tensor xg = at::stack({z.select(1, 2), z.select(1, 1)}, 1);
  EXPECT_TRUE(at::allclose(y.slice(1, 0, 2), one.forward(xf), 1e-6, 1e-6));
  EXPECT_TRUE(at::allclose(y.slice(1, 2, 4), one.forward(xg), 1e-6, 1e-6));
  EXPECT_TRUE(at::allclose(y.select(1, 4), z.select(1, 0) - z.select(1, 2), 1e-6, 1e-6));
  // A counterexample of the product maps back to the declared elements.
  const auto [xs, ys] = declared_values(q.property, {0.1, 0.2, 0.3}, {1, 2, 3, 4, -0.2});
  EXPECT_EQ(xs, (std::vector<double>{0.1, 0.2, 0.3, 0.2}));
  EXPECT_EQ(ys, (std::vector<double>{1, 2, 3, 4}));
}

TEST(Product, NetworksThatAreNotCopiesAreRefused) {
  std::string text = kMonotone;
  text.replace(text.find("(equal-to f) "), 13, "");
  const VnnlibProperty p = parse_vnnlib_string(text, "two");
  std::vector<BoundGraph> copies;
  copies.push_back(model());
  copies.push_back(model());
  try {
    product_problem(std::move(copies), p);
    ADD_FAILURE() << "two different networks were accepted";
  } catch (const ParseError& e) {
    EXPECT_NE(std::string(e.what()).find("network 'g' is not declared (equal-to f)"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace distcrown::io
