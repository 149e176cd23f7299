// Agreement with auto_LiRPA (fixtures/refs, and the refs/ops cases of
// testing::supported_ops_cases()): IBP and CROWN bounds within max(1e-4·|ref|, 1e-5),
// the forward pass at the box centre within 1e-5·max(1, |y|) of a float64 ONNX evaluation, and
// every bound sound against the sampled output ranges stored with the reference.
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>

#include "distcrown/io/onnx_loader.hpp"
#include "distcrown/methods/compute_bounds.hpp"
#include "distcrown/methods/crown.hpp"
#include "distcrown/util/error.hpp"
#include "fixtures.hpp"

namespace distcrown {
namespace {

using testing::fixtures_dir;

struct Case {
  std::string name;
  nlohmann::json ref;
  BoundGraph graph;
  InputBox box;
};

Case load_case(const std::filesystem::path& p) {
  Case c{p.stem().string(), testing::read_json(p), {}, {}};
  c.graph = io::load_onnx((fixtures_dir() / c.ref["model"].get<std::string>()).string());
  c.box = testing::reference_box(c.ref);
  return c;
}

void expect_close(const at::Tensor& got, const nlohmann::json& ref, const std::string& what) {
  const auto r = ref.get<std::vector<double>>();
  const at::Tensor g = got.to(at::kDouble).reshape({-1}).contiguous();
  ASSERT_EQ(g.numel(), int64_t(r.size())) << what;
  for (size_t i = 0; i < r.size(); ++i) {
    const double tol = std::max(1e-4 * std::abs(r[i]), 1e-5);
    EXPECT_NEAR(g[int64_t(i)].item<double>(), r[i], tol) << what << " output " << i;
  }
}

void expect_sound(const Interval& b, const nlohmann::json& sampled, const std::string& what) {
  const auto lo = sampled["min"].get<std::vector<double>>();
  const auto hi = sampled["max"].get<std::vector<double>>();
  const at::Tensor l = b.lower.to(at::kDouble).reshape({-1});
  const at::Tensor u = b.upper.to(at::kDouble).reshape({-1});
  for (size_t i = 0; i < lo.size(); ++i) {
    const double tol = 1e-5 * std::max(1.0, std::abs(lo[i]));
    EXPECT_LE(l[int64_t(i)].item<double>(), lo[i] + tol) << what << " lower " << i;
    EXPECT_GE(u[int64_t(i)].item<double>(), hi[i] - tol) << what << " upper " << i;
  }
}

// IBP and CROWN within max(1e-4·|ref|, 1e-5) of the reference, both sound against its sampled
// output ranges.
void check_ibp_and_crown(const std::filesystem::path& f) {
  c10::NoGradGuard no_grad;
  Case c = load_case(f);
  BoundOptions as_ref;
  as_ref.scheme = testing::reference_scheme(c.ref, "crown");
  const Interval crown = compute_bounds(c.graph, c.box, Method::kCrown, as_ref);
  expect_close(crown.lower, c.ref["crown"]["lower"], c.name + " crown lower");
  expect_close(crown.upper, c.ref["crown"]["upper"], c.name + " crown upper");
  for (const char* key : {"sampled", "sampled_vertices"}) {
    expect_sound(crown, c.ref[key], c.name + " crown vs " + key);
  }
  if (!c.ref.contains("ibp")) {
    // auto_LiRPA's IBP failed (the ref's note: the ViT's softmax sums reach 0 after exp
    // underflows); exp overflows ours on the same intervals, and the softmax values still stay
    // in [0, 1]: finite (compute_bounds throws otherwise) and sound.
    const Interval ibp = compute_bounds(c.graph, c.box, Method::kIbp);
    for (const char* key : {"sampled", "sampled_vertices"}) {
      expect_sound(ibp, c.ref[key], c.name + " ibp vs " + key);
    }
    return;
  }
  const Interval ibp = compute_bounds(c.graph, c.box, Method::kIbp);
  expect_close(ibp.lower, c.ref["ibp"]["lower"], c.name + " ibp lower");
  expect_close(ibp.upper, c.ref["ibp"]["upper"], c.name + " ibp upper");
  for (const char* key : {"sampled", "sampled_vertices"}) {
    expect_sound(ibp, c.ref[key], c.name + " ibp vs " + key);
  }
}

// The forward pass at the box centre within 1e-5·max(1, |y|) of the float64 ONNX evaluation.
void check_forward_at_centre(const std::filesystem::path& f) {
  c10::NoGradGuard no_grad;
  Case c = load_case(f);
  // The stored bounds are float32 values, so reading them as float64 loses nothing.
  const Interval box = testing::reference_box(c.ref, at::kDouble);
  const at::Tensor centre = (box.lower + box.upper) / 2;
  c.graph.to_dtype(at::kDouble);
  const at::Tensor y = c.graph.forward(centre).reshape({-1});
  const auto ref = c.ref["center_output"]["values"].get<std::vector<double>>();
  ASSERT_EQ(y.numel(), int64_t(ref.size()));
  for (size_t i = 0; i < ref.size(); ++i) {
    EXPECT_NEAR(y[int64_t(i)].item<double>(), ref[i], 1e-5 * std::max(1.0, std::abs(ref[i])))
        << "output " << i;
  }
}

TEST(ReferenceBounds, IbpAndCrownMatchAutoLirpa) {
  DISTCROWN_REQUIRE_FIXTURES();
  const auto files = testing::reference_files();
  ASSERT_FALSE(files.empty());
  for (const auto& f : files) {
    SCOPED_TRACE(f.filename().string());
    check_ibp_and_crown(f);
  }
}

// The refs/ops cases whose operators exist (testing::supported_ops_cases(): the Sigmoid MLP,
// the AveragePool CNN and the ViT).
TEST(ReferenceBounds, OpsCasesIbpAndCrownMatchAutoLirpa) {
  DISTCROWN_REQUIRE_FIXTURES();
  const auto files = testing::ops_reference_files();
  ASSERT_FALSE(files.empty());
  for (const auto& f : files) {
    SCOPED_TRACE(f.filename().string());
    check_ibp_and_crown(f);
  }
}

TEST(ReferenceBounds, ForwardAtCentreMatchesFloat64Onnx) {
  DISTCROWN_REQUIRE_FIXTURES();
  for (const auto& f : testing::reference_files()) {
    SCOPED_TRACE(f.filename().string());
    check_forward_at_centre(f);
  }
  for (const auto& f : testing::ops_reference_files()) {
    SCOPED_TRACE(f.filename().string());
    check_forward_at_centre(f);
  }
}

}  // namespace
}  // namespace distcrown
