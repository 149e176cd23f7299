// Tensor parallelism under mpirun (ctest runs this at 1, 2 and 4 ranks):
//   partition   Linear -> Relu -> Linear chains become zones (1, 2, 3 zones for 256x2/4/6),
//               balanced uneven widths, each rank holds its share of the zone weights
//   forward     the sharded graph computes the plain graph's outputs (and their input gradient)
//   tp-exact    IBP and CROWN bounds (both intermediate schemes, chunked or not) within
//               1e-5·max_j |b_j| of one process, on random MLPs of uneven widths, a convnet and
//               every fixture model
//   tp          sound (sampled outputs inside), equal to one process with a single zone; on the
//               3-zone mnist net it is looser, at every P (the drift the exact mode removes)
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>

#include "distcrown/collective/mpi.hpp"
#include "distcrown/io/onnx_loader.hpp"
#include "distcrown/methods/compute_bounds.hpp"
#include "distcrown/methods/crown.hpp"
#include "distcrown/sharding/partitioner.hpp"
#include "distcrown/sharding/sharded_param.hpp"
#include "distcrown/util/error.hpp"
#include "fixtures.hpp"
#include "io/synthetic.hpp"

namespace distcrown {
namespace {

constexpr double kExactTol = 1e-5;  // relative to the largest |bound| of the model

collective::CommPtr world() { return collective::make_mpi_communicator(); }

struct Model {
  std::string name;
  std::string bytes;  // serialized ONNX
  InputBox box;
  nlohmann::json ref;  // fixture reference (sampled output ranges), or null
};

std::vector<Model> random_models() {
  std::vector<Model> out;
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(5);
  // Widths not divisible by 2 or 4, depths giving 1 to 3 zones, one net with fewer neurons per
  // rank than the row padding (hidden 5: zones only up to P = 5).
  const struct {
    int64_t in, hidden;
    int depth;
    int64_t out;
    uint64_t seed;
    double eps;
  } specs[] = {{12, 33, 1, 5, 21, 0.1},
               {20, 37, 3, 7, 22, 0.1},
               {9, 29, 5, 4, 23, 0.08},
               {6, 5, 4, 3, 24, 0.3},
               {30, 64, 6, 10, 25, 0.05}};
  for (const auto& s : specs) {
    const at::Tensor x = at::empty({1, s.in}, at::kFloat).uniform_(0, 1, gen);
    out.push_back(
        {"mlp" + std::to_string(s.hidden) + "x" + std::to_string(s.depth) + " seed " +
             std::to_string(s.seed),
         io::serialize_onnx_model(io::random_mlp_onnx(s.in, s.hidden, s.depth, s.out, s.seed)),
         {x - s.eps, x + s.eps},
         nullptr});
  }
  const at::Tensor img = at::empty({1, 1, 28, 28}, at::kFloat).uniform_(0, 1, gen);
  out.push_back({"convnet",
                 io::serialize_onnx_model(io::random_convnet_onnx(45, 6)),
                 {img - 0.02, img + 0.02},
                 nullptr});
  return out;
}

std::vector<Model> fixture_models() {
  std::vector<Model> out;
  std::vector<std::filesystem::path> files = testing::reference_files();
  for (const auto& f : testing::ops_reference_files()) files.push_back(f);
  for (const auto& f : files) {
    const auto ref = testing::read_json(f);
    std::ifstream in(testing::fixtures_dir() / ref["model"].get<std::string>(), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    out.push_back({f.stem().string(), bytes, testing::reference_box(ref), ref});
  }
  return out;
}

// |got − want| <= tol · max_j |want_j| on both sides.
void expect_close(const Interval& want, const Interval& got, double tol, const std::string& what) {
  const double scale =
      std::max(want.lower.abs().max().item<double>(), want.upper.abs().max().item<double>());
  const double dl = (want.lower - got.lower).abs().max().item<double>();
  const double du = (want.upper - got.upper).abs().max().item<double>();
  EXPECT_LE(dl, tol * std::max(scale, 1e-30)) << what << ": lower, scale " << scale;
  EXPECT_LE(du, tol * std::max(scale, 1e-30)) << what << ": upper, scale " << scale;
}

// Outputs of the plain graph at random points of the box (and its corners) lie in `b`.
void expect_sound(const BoundGraph& plain, const InputBox& box, const Interval& b,
                  const std::string& what) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(3);
  const int64_t n = 256;
  std::vector<int64_t> shape(box.lower.sizes().begin(), box.lower.sizes().end());
  shape[0] = n;
  at::Tensor t = at::empty(shape, at::kFloat).uniform_(0, 1, gen);
  t.select(0, 0).fill_(0);
  t.select(0, 1).fill_(1);
  const at::Tensor x = box.lower + (box.upper - box.lower) * t;
  for (int64_t k = 0; k < n; ++k) {
    const at::Tensor y = plain.forward(x.narrow(0, k, 1));  // [1, out]
    const at::Tensor tol = y.abs().clamp_min(1) * 1e-5;
    EXPECT_TRUE((y >= b.lower - tol).all().item<bool>()) << what << ": sample below lower";
    EXPECT_TRUE((y <= b.upper + tol).all().item<bool>()) << what << ": sample above upper";
  }
}

TEST(TensorParallel, PartitionBuildsBalancedZones) {
  c10::NoGradGuard no_grad;
  const collective::CommPtr comm = world();
  const int P = comm->size();
  for (int depth = 1; depth <= 5; ++depth) {
    SCOPED_TRACE("depth " + std::to_string(depth));
    const BoundGraph plain = io::make_random_mlp(10, 33, depth, 4, 1);
    BoundGraph g = io::make_random_mlp(10, 33, depth, 4, 1);
    const sharding::TpPlan plan = sharding::partition_tensor_parallel(g, comm);
    ASSERT_EQ(plan.zones.size(), size_t((depth + 1) / 2));
    int64_t zone_full = 0;  // bytes of the zones' parameters in the plain graph
    int64_t row_bias = 0;   // bytes of the Rows' biases, which every rank holds whole
    auto& source = const_cast<BoundGraph&>(plain);
    for (const sharding::TpZone& z : plan.zones) {
      EXPECT_EQ(z.hidden, 33);
      const sharding::Split s = z.local;
      EXPECT_EQ(s.width, 33 / P + (comm->rank() < 33 % P ? 1 : 0));
      EXPECT_EQ(g.node(z.col).shape, (std::vector<int64_t>{1, s.width}));
      EXPECT_EQ(g.node(z.relu).shape, (std::vector<int64_t>{1, s.width}));
      EXPECT_EQ(g.node(z.row).op->op_type(), "LinearTPRow");
      const OutputShard* shard = g.node(z.col).op->output_shard();
      ASSERT_NE(shard, nullptr);
      EXPECT_EQ(shard->offset, s.offset);
      EXPECT_EQ(shard->global, 33);
      for (int k : {z.col, z.row}) {
        for (ParamPtr* p : source.node(k).op->params()) zone_full += (*p)->resident_bytes();
      }
      row_bias += (*source.node(z.row).op->params().at(1))->resident_bytes();
    }
    // Summed over ranks, the zone weights are held once; only each Row's bias is replicated.
    at::Tensor held = at::tensor({double(plan.sharded_param_bytes)}, at::kDouble);
    comm->all_reduce(held, collective::ReduceOp::kSum);
    EXPECT_EQ(int64_t(held.item<double>()), zone_full + (P - 1) * row_bias);
    EXPECT_EQ(plan.replicated_param_bytes + plan.sharded_param_bytes, g.param_bytes());
  }
}

// `of` (a tensor computed from a graph and the model) on the plain graph and on its
// tensor-parallel partition: equal within 1e-5·max(1, |want|) on every random model.
void expect_partition_matches_plain(
    const std::function<at::Tensor(const BoundGraph&, const Model&)>& of) {
  const collective::CommPtr comm = world();
  for (const Model& m : random_models()) {
    SCOPED_TRACE(m.name);
    const BoundGraph plain = io::load_onnx_bytes(m.bytes, m.name);
    BoundGraph tp = io::load_onnx_bytes(m.bytes, m.name);
    sharding::partition_tensor_parallel(tp, comm);
    const at::Tensor want = of(plain, m);
    const at::Tensor got = of(tp, m);
    ASSERT_TRUE(got.defined());
    EXPECT_LE((want - got).abs().max().item<double>(),
              1e-5 * std::max(1.0, want.abs().max().item<double>()));
  }
}

TEST(TensorParallel, ForwardMatchesPlainGraph) {
  c10::NoGradGuard no_grad;
  expect_partition_matches_plain([](const BoundGraph& g, const Model& m) {
    return g.forward((m.box.lower + m.box.upper) / 2);
  });
}

TEST(TensorParallel, InputGradientMatchesPlainGraph) {
  // PGD differentiates the network's outputs by its input: the zones' forward collectives carry
  // the gradient (a Col's input through copy_to_shards, a Row's partial sums through
  // reduce_from_shards), so every rank gets the whole gradient, not its zone share's.
  expect_partition_matches_plain([](const BoundGraph& g, const Model& m) {
    const at::Tensor x = ((m.box.lower + m.box.upper) / 2).detach().requires_grad_(true);
    const at::Tensor y = g.forward(x);
    (y * at::arange(1, y.numel() + 1, y.options()).reshape(y.sizes())).sum().backward();
    return x.grad();
  });
}

struct Setting {
  Method method;
  IntermediateScheme scheme;
  int64_t chunk;
  std::string name;
};

void check_exact(const std::vector<Model>& models, const std::vector<Setting>& settings) {
  c10::NoGradGuard no_grad;
  const collective::CommPtr comm = world();
  for (const Model& m : models) {
    SCOPED_TRACE(m.name);
    const BoundGraph plain = io::load_onnx_bytes(m.bytes, m.name);
    BoundGraph tp = io::load_onnx_bytes(m.bytes, m.name);
    sharding::shard_graph(tp, sharding::ShardPlan::kTpExact, comm);
    for (const Setting& s : settings) {
      // Where auto_LiRPA's IBP failed (the ViT: exp overflows on its IBP intervals) ours throws
      // NumericError too (test_reference_bounds checks it): nothing to compare.
      if (s.method == Method::kIbp && !m.ref.is_null() && !m.ref.contains("ibp")) continue;
      BoundOptions opt;
      opt.scheme = s.scheme;
      opt.crown_batch_size = s.chunk;
      const Interval want = compute_bounds(plain, m.box, s.method, opt);
      const Interval got = compute_bounds(tp, m.box, s.method, opt);
      expect_close(want, got, kExactTol, s.name);
      if (!m.ref.is_null()) {
        // Sound against the fixture's sampled output ranges.
        const auto lo = at::tensor(m.ref["sampled"]["min"].get<std::vector<double>>(), at::kDouble);
        const auto hi = at::tensor(m.ref["sampled"]["max"].get<std::vector<double>>(), at::kDouble);
        const at::Tensor gl = got.lower.to(at::kDouble).reshape({-1});
        const at::Tensor gu = got.upper.to(at::kDouble).reshape({-1});
        EXPECT_TRUE((gl <= lo + lo.abs().clamp_min(1) * 1e-5).all().item<bool>()) << s.name;
        EXPECT_TRUE((gu >= hi - hi.abs().clamp_min(1) * 1e-5).all().item<bool>()) << s.name;
      } else {
        expect_sound(plain, m.box, got, s.name);
      }
    }
  }
}

TEST(TensorParallel, ExactMatchesOneProcessOnRandomModels) {
  check_exact(random_models(),
              {{Method::kIbp, IntermediateScheme::kAutoLirpa, 0, "ibp"},
               {Method::kCrown, IntermediateScheme::kAutoLirpa, 0, "crown"},
               {Method::kCrown, IntermediateScheme::kAutoLirpa, 5, "crown chunk 5"},
               {Method::kCrown, IntermediateScheme::kTight, 0, "crown tight"}});
}

TEST(TensorParallel, ExactMatchesOneProcessOnFixtures) {
  DISTCROWN_REQUIRE_FIXTURES();
  check_exact(fixture_models(), {{Method::kIbp, IntermediateScheme::kAutoLirpa, 0, "ibp"},
                                 {Method::kCrown, IntermediateScheme::kAutoLirpa, 0, "crown"}});
}

TEST(TensorParallel, IbpInsideZonesIsSound) {
  c10::NoGradGuard no_grad;
  const collective::CommPtr comm = world();
  for (const Model& m : random_models()) {
    SCOPED_TRACE(m.name);
    const BoundGraph plain = io::load_onnx_bytes(m.bytes, m.name);
    BoundGraph tp = io::load_onnx_bytes(m.bytes, m.name);
    const sharding::TpPlan plan = sharding::partition_tensor_parallel(tp, comm);
    BoundOptions opt;
    opt.sharded_intermediate = ShardedIntermediate::kIbp;
    const Interval got = compute_bounds(tp, m.box, Method::kCrown, opt);
    expect_sound(plain, m.box, got, "tp");
    if (plan.zones.size() == 1 && tp.affine_from_input(plan.zones[0].col)) {
      // One zone whose Col is fed by the input, where IBP is exact anyway (not the convnet's).
      expect_close(compute_bounds(plain, m.box, Method::kCrown, opt), got, kExactTol, "1 zone");
    }
  }
}

TEST(TensorParallel, IbpInsideZonesDriftsWithZones) {
  DISTCROWN_REQUIRE_FIXTURES();
  c10::NoGradGuard no_grad;
  const collective::CommPtr comm = world();
  // At one rank too: the partition still makes the three zones (each rank's slice the whole
  // width), and IBP still bounds the neurons inside them.
  int compared = 0;  // mnist_256x6 cases
  for (const Model& m : fixture_models()) {
    if (m.name.find("mnist_256x6") == std::string::npos) continue;
    SCOPED_TRACE(m.name);
    ++compared;
    const BoundGraph plain = io::load_onnx_bytes(m.bytes, m.name);
    BoundGraph tp = io::load_onnx_bytes(m.bytes, m.name);
    ASSERT_EQ(sharding::partition_tensor_parallel(tp, comm).zones.size(), 3U);
    BoundOptions opt;
    opt.sharded_intermediate = ShardedIntermediate::kIbp;
    const Interval want = compute_bounds(plain, m.box, Method::kCrown);
    const Interval got = compute_bounds(tp, m.box, Method::kCrown, opt);
    // Sound but looser: IBP replaces CROWN for the neurons of zones 2 and 3.
    EXPECT_TRUE((got.lower <= want.lower + 1e-5).all().item<bool>());
    EXPECT_TRUE((got.upper >= want.upper - 1e-5).all().item<bool>());
    EXPECT_GT((want.lower - got.lower).max().item<double>(), 1.0);
  }
  EXPECT_GT(compared, 0) << "no mnist_256x6 reference among the fixtures: nothing compared";
}

TEST(TensorParallel, SpecParallelIsRefused) {
  const collective::CommPtr comm = world();
  if (comm->size() == 1) GTEST_SKIP() << "spec-parallel is a no-op at one rank";
  BoundGraph g = io::make_random_mlp(10, 16, 2, 4, 1);
  sharding::partition_tensor_parallel(g, comm);
  const InputBox box{at::zeros({1, 10}), at::ones({1, 10})};
  EXPECT_THROW(CrownEngine(g, box, BoundOptions{}, PassContext::spread_over(comm)),
               InvalidArgument);
}

}  // namespace
}  // namespace distcrown
