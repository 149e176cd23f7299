// util/recompute.hpp: a recomputed step gives the gradients of the plain autograd graph bit for
// bit, keeps only its inputs for the backward (measured on the counting allocator), and is a plain
// call without grad mode. The ReLU step reads α given unread (RelaxParams::source_l) inside its
// recomputed step: the same values and gradients as α read before, one A-sized copy fewer kept.
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>

#include "distcrown/util/error.hpp"
#include "distcrown/util/memory.hpp"
#include "ops/relu.hpp"
#include "util/recompute.hpp"

namespace distcrown {
namespace {

// A ReLU-like step on A with a slope s: the shape of CROWN's relax_side (clamp, two products, an
// intercept term per row).
std::vector<at::Tensor> step(const std::vector<at::Tensor>& x) {
  const at::Tensor& A = x[0];
  const at::Tensor& s = x[1];
  const at::Tensor pos = A.clamp_min(0);
  const at::Tensor neg = A - pos;
  const at::Tensor upper = s * 0.5 + 1.0;
  return {pos * s + neg * upper, (neg * upper).sum(1)};
}

// Three chained steps; returns the loss.
at::Tensor chain(const at::Tensor& A0, const at::Tensor& s, bool recompute) {
  at::Tensor A = A0;
  at::Tensor loss = at::zeros({}, A0.options());
  for (int k = 0; k < 3; ++k) {
    const std::vector<at::Tensor> in{A, s};
    const std::vector<at::Tensor> out = recompute ? recomputed(step, in) : step(in);
    A = out[0];
    loss = loss + out[1].sum();
  }
  return loss + A.sum();
}

TEST(Recompute, GradientsEqualThePlainGraph) {
  at::manual_seed(3);
  at::Tensor A = at::randn({64, 32});
  const at::Tensor s0 = at::rand({64, 32});
  A.index_put_({0, 0}, 0.0);  // A == 0 takes clamp's convention in both graphs
  c10::AutoGradMode on(true);
  std::vector<at::Tensor> grads;
  for (const bool recompute : {false, true}) {
    const at::Tensor a = A.clone().requires_grad_(true);
    const at::Tensor s = s0.clone().requires_grad_(true);
    chain(a, s, recompute).backward();
    grads.push_back(a.grad());
    grads.push_back(s.grad());
  }
  EXPECT_TRUE(at::equal(grads[0], grads[2]));
  EXPECT_TRUE(at::equal(grads[1], grads[3]));
}

TEST(Recompute, KeepsOnlyItsInputs) {
  memory::install_counting_allocator();
  at::manual_seed(4);
  c10::AutoGradMode on(true);
  std::vector<int64_t> kept;
  for (const bool recompute : {false, true}) {
    const at::Tensor a = at::randn({256, 1024}).requires_grad_(true);
    const at::Tensor s = at::rand({256, 1024}).requires_grad_(true);
    const int64_t before = memory::live_bytes();
    at::Tensor loss = chain(a, s, recompute);
    kept.push_back(memory::live_bytes() - before);  // what the graph holds for the backward
    loss.backward();
    EXPECT_GT(a.grad().abs().sum().item<double>(), 0.0);
  }
  // Plain: every step keeps its clamped A, its products' operands and its output; recomputed:
  // each step's output (the next step's input) alone.
  const int64_t one = int64_t{256} * 1024 * 4;  // bytes of one [256, 1024] float tensor
  EXPECT_GE(kept[0], 9 * one) << "plain graph";
  EXPECT_LE(kept[1], 4 * one) << "recomputed";
}

// A ReLU step under α (lower side, 64 rows over [1, 4096] neurons); returns {A', bias, loss}.
// `unread`: α arrives as its storage plus the rows to read (AlphaSlopes, BaB's SplitHook),
// else read beforehand.
std::vector<at::Tensor> relu_alpha_step(const at::Tensor& A, const at::Tensor& storage,
                                        const at::Tensor& rows, const Interval& pre, bool unread) {
  const NodePtr relu = ops::make_relu();
  const auto read = [rows](const at::Tensor& a) { return a.index_select(0, rows); };
  RelaxParams p;
  if (unread) {
    p.source_l = storage;
    p.read_l = read;
  } else {
    p.alpha_l = read(storage);
  }
  const std::vector<const Interval*> in{&pre};
  BiasPair bias;
  const at::Tensor out = relu->backward_relaxed(BoundA{A, {}}, in, bias, p).at(0).lA;
  return {out, bias.lower, (out * out).sum() + bias.lower.sum()};
}

TEST(Recompute, ReluReadsAlphaInsideItsStep) {
  memory::install_counting_allocator();
  at::manual_seed(5);
  c10::AutoGradMode on(true);
  const int64_t rows = 64;
  const int64_t n = 4096;
  const at::Tensor A0 = at::randn({rows, 1, n});
  const at::Tensor centre = at::randn({1, n});
  const Interval pre{centre - at::rand({1, n}), centre + at::rand({1, n})};  // many straddle 0
  const at::Tensor alpha0 = at::rand({2 * rows, 1, n});  // more rows stored than the pass reads
  const at::Tensor pick = at::randperm(2 * rows).slice(0, 0, rows);
  std::vector<at::Tensor> values;
  std::vector<at::Tensor> grads;
  std::vector<int64_t> kept;
  for (const bool unread : {false, true}) {
    const at::Tensor A = A0.clone().requires_grad_(true);
    const at::Tensor storage = alpha0.clone().requires_grad_(true);
    const int64_t before = memory::live_bytes();
    std::vector<at::Tensor> got = relu_alpha_step(A, storage, pick, pre, unread);
    kept.push_back(memory::live_bytes() - before);  // outputs and what autograd keeps
    got[2].backward();
    values.push_back(got[0].detach());
    values.push_back(got[1].detach());
    grads.push_back(A.grad());
    grads.push_back(storage.grad());
  }
  EXPECT_TRUE(at::equal(values[0], values[2]));
  EXPECT_TRUE(at::equal(values[1], values[3]));
  EXPECT_TRUE(at::equal(grads[0], grads[2]));
  EXPECT_TRUE(at::equal(grads[1], grads[3]));
  EXPECT_GT(grads[3].abs().sum().item<double>(), 0.0);
  // Read before: the graph keeps the read rows ([64, 1, 4096], one A) besides A and α's storage.
  const int64_t one = rows * n * 4;
  EXPECT_GE(kept[0] - kept[1], one) << "read before: " << kept[0] << " B, unread: " << kept[1];
}

TEST(Recompute, WithoutGradModeItIsAPlainCall) {
  const at::Tensor a = at::randn({4, 3}).requires_grad_(true);
  const at::Tensor s = at::rand({4, 3});
  {
    c10::NoGradGuard off;
    const std::vector<at::Tensor> out = recomputed(step, {a, s});
    EXPECT_FALSE(out[0].requires_grad());
  }
  c10::AutoGradMode on(true);
  EXPECT_TRUE(recomputed(step, {a, s})[0].requires_grad());
  EXPECT_THROW((void)recomputed(step, {a, at::Tensor()}), Error);
}

}  // namespace
}  // namespace distcrown
