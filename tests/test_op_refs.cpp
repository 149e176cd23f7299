// Agreement with auto_LiRPA on small networks around GELU, Sin, Cos, LayerNormalization, LeakyRelu
// and ConvTranspose
// (tests/data/op_refs, made by scripts/make_op_refs.py with auto_LiRPA bfb7997; issue 12). Each
// JSON describes its network in ONNX terms (nodes, float32 initializers); this test builds the
// same ONNX graph with OnnxBuilder, bounds it with IBP, CROWN and α-CROWN at the references'
// settings, and checks
//   IBP, CROWN   within max(1e-4·|ref|, 1e-5) of auto_LiRPA's
//   α-CROWN      never looser than auto_LiRPA's by more than 1e-3·|ref|
// except where deviations() below lists a known disagreement, the relation checked instead and why
// (the test prints every case's numbers and the relation it checked)
//   every bound  contains the sampled outputs stored with the reference and our own samples
//   forward      at the box centre within 1e-5·max(1, |y|) of the float64 numpy evaluation.
// The data is in the repository: no ../shared/fixtures needed.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "distcrown/io/onnx_loader.hpp"
#include "distcrown/methods/alpha_crown.hpp"
#include "distcrown/methods/compute_bounds.hpp"
#include "fixtures.hpp"
#include "onnx_builder.hpp"
#include "sampling.hpp"

namespace distcrown {
namespace {

using testing::fmt;

std::filesystem::path data_dir() {
  return std::filesystem::path(DISTCROWN_SOURCE_DIR) / "tests" / "data" / "op_refs";
}

std::vector<std::filesystem::path> case_files() {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::directory_iterator(data_dir())) {
    if (e.path().extension() == ".json") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// How the ONNX graph spells GELU: the Gelu operator (opset 20) or the nodes torch.onnx exports
// before opset 20 (Div by √2, Erf, Add 1, Mul by x, Mul by 0.5), which the loader fuses into one
// Gelu node (io/onnx_gelu_fusion.hpp): both are bounded alike. auto_LiRPA bounds neither: the
// references come from its own BoundGelu (scripts/make_op_refs.py).
enum class GeluForm { kOperator, kErf };

// The ONNX model of a reference's `network` (opset 17, or 20 with the Gelu operator).
BoundGraph build_network(const nlohmann::json& ref, GeluForm gelu = GeluForm::kOperator) {
  const nlohmann::json& net = ref["network"];
  testing::OnnxBuilder b;
  b.model().opset = 17;
  b.input(net["input"].get<std::string>(), ref["input_shape"].get<std::vector<int64_t>>());
  b.output(net["output"].get<std::string>());
  for (const auto& [name, t] : net["initializers"].items()) {
    b.initializer(name, at::tensor(t["values"].get<std::vector<double>>(), at::kDouble)
                            .to(at::kFloat)
                            .reshape(t["dims"].get<std::vector<int64_t>>()));
  }
  for (const auto& n : net["nodes"]) {
    const auto name = n["name"].get<std::string>();
    const auto op = n["op"].get<std::string>();
    const auto in = n["inputs"].get<std::vector<std::string>>();
    const auto out = n["outputs"].get<std::vector<std::string>>();
    if (op == "Gelu" && gelu == GeluForm::kErf) {
      b.initializer("sqrt2", at::scalar_tensor(std::sqrt(2.0), at::kFloat));
      b.initializer("one", at::scalar_tensor(1.0, at::kFloat));
      b.initializer("half", at::scalar_tensor(0.5, at::kFloat));
      b.node(name + "/div", "Div", {in[0], "sqrt2"}, {name + "/d"});
      b.node(name + "/erf", "Erf", {name + "/d"}, {name + "/e"});
      b.node(name + "/add", "Add", {name + "/e", "one"}, {name + "/e1"});
      b.node(name + "/mul", "Mul", {in[0], name + "/e1"}, {name + "/m"});
      b.node(name + "/half", "Mul", {name + "/m", "half"}, out);
      continue;
    }
    if (op == "Gelu") b.model().opset = 20;
    std::vector<io::OnnxAttribute> attrs;
    for (const auto& [key, v] : n["attrs"].items()) {
      if (v.is_array()) {
        attrs.push_back(testing::attr_ints(key, v.get<std::vector<int64_t>>()));
      } else {
        attrs.push_back(v.is_number_integer() ? testing::attr_int(key, v.get<int64_t>())
                                              : testing::attr_float(key, v.get<float>()));
      }
    }
    b.node(name, op, in, out, attrs);
  }
  return io::load_onnx_bytes(b.bytes(), ref["case"].get<std::string>() + ".onnx");
}

std::vector<double> values(const at::Tensor& t) {
  const at::Tensor d = t.to(at::kDouble).contiguous().reshape({-1});
  return {d.data_ptr<double>(), d.data_ptr<double>() + d.numel()};
}

// How a method's bounds must relate to the reference's.
enum class Relation {
  kMatch,      // within max(1e-4·|ref|, 1e-5)
  kNotLooser,  // never looser than the reference by more than 1e-3·|ref| (or a listed bar)
  kSoundOnly,  // a different, looser relaxation: only soundness is checked; the gap is printed
};

// Where distcrown's relaxation differs from auto_LiRPA's, so that IBP or CROWN cannot match, or
// where α-CROWN misses the 1e-3 bar; the relation that holds instead, and why. Every entry is a
// known disagreement (numbers in the table this test prints), not a tolerance.
struct Deviation {
  const char* case_part;  // matches the case names that contain it
  const char* method;
  Relation relation;
  const char* why;
  double bar = 1e-3;  // kNotLooser: looser by at most bar·|ref|
};
const std::vector<Deviation>& deviations() {
  static const std::vector<Deviation> d{
      // GELU as the Gelu operator (src/ops/gelu.cpp: one function, BoundGelu's slopes), or as
      // the nodes torch.onnx exports before opset 20 (/erf: fused into the same node at load;
      // without the fusion, node by node, 1.6-2.0× (IBP), 2.4-2.8× (CROWN) wider). IBP:
      // ours is exact, auto_LiRPA's always takes GELU's global minimum as the lower bound, so ours
      // is never looser and tighter where no interval holds the minimum. CROWN matches (within
      // 9.3e-5·|ref|: auto_LiRPA reads the tangent points of its straddling cases from tables on
      // a 0.01 grid, we bisect, and every line takes its tightest intercept). α-CROWN: BoundGelu's
      // tangent points (its table's grid points for the range ends), and it matches (checked
      // against the 1e-3 bar; within 1.1e-6 at the time of writing).
      {"gelu_mlp", "ibp", Relation::kNotLooser, "exact IBP, auto_LiRPA's includes the minimum"},
      // Sin / Cos with an extremum inside a hidden interval: distcrown takes the chord's slope
      // with the tightest intercepts, auto_LiRPA chooses between the chord and tangents from its
      // tables (bound_relax_branch; src/ops/trig.cpp). Where no interval holds an extremum
      // (*_monotone) CROWN matches within 1e-6; elsewhere ours is tighter except a few bounds
      // of *_small (looser by at most 2.5e-4·max(|ref|, 0.1)).
      {"sin_mlp_small", "crown", Relation::kNotLooser, "extremum inside: other lines"},
      {"sin_mlp_medium", "crown", Relation::kNotLooser, "extremum inside: other lines"},
      {"sin_mlp_wide", "crown", Relation::kNotLooser, "extremum inside: other lines"},
      {"cos_mlp_small", "crown", Relation::kNotLooser, "extremum inside: other lines"},
      {"cos_mlp_wide", "crown", Relation::kNotLooser, "extremum inside: other lines"},
      // α-CROWN on Sin / Cos: BoundSin's tangent points, initialised and projected as there
      // (src/ops/trig.cpp), so the optimisation follows auto_LiRPA's and the bounds match (within
      // 2.4e-6 at the time of writing) except on sin_mlp_medium, where two of auto_LiRPA's lines
      // are not sound: BoundSin's tables give the tangent at the right end for the grid point at
      // or below u (2π/1000 grid), so its tangent there (α stays at that end of its range) passes
      // above sin on [l, u] by up to 1.75e-3 (lower line of neuron 4) and below it by up to
      // 4.97e-3 (upper line of neuron 5; float64 sampling of the lines BoundSin builds). Ours,
      // at the same slopes, takes the tightest sound intercepts, and ends looser on upper 2 by
      // 1.1e-3·|ref| (1.44047 against 1.43887): held to 2e-3.
      {"sin_mlp_medium", "alpha_crown", Relation::kNotLooser, "auto_LiRPA's lines unsound", 2e-3},
      // LeakyRelu, lowered to α·x + (1 − α)·Relu(x) (src/ops/relu.cpp): CROWN takes the ReLU's
      // adaptive lower slope (α or 1 per neuron), auto_LiRPA's BoundLeakyRelu (9d100ec) a fixed
      // one, so ours is tighter (width 1.416 against 1.465; one upper bound already at auto_LiRPA's
      // α-CROWN value). α-CROWN optimises the ReLU's slope, which moves the effective slope by
      // (1 − α) per step: at 20 iterations ours is 1.4e-4 narrower overall, one lower bound
      // looser by 2.1e-3·|ref| (0.54900 against 0.55016): held to 2.5e-3.
      {"leaky_relu_mlp", "crown", Relation::kNotLooser, "adaptive lower slope: tighter"},
      {"leaky_relu_mlp", "alpha_crown", Relation::kNotLooser, "α on the ReLU's slope", 2.5e-3},
  };
  return d;
}

// The relation and the kNotLooser bar for a case and method.
std::pair<Relation, double> relation(const std::string& name, const std::string& method) {
  for (const Deviation& d : deviations()) {
    if (name.find(d.case_part) != std::string::npos && method == d.method) {
      return {d.relation, d.bar};
    }
  }
  return {method == "alpha_crown" ? Relation::kNotLooser : Relation::kMatch, 1e-3};
}

// The relation checked, for the printed table.
std::string relation_name(const std::string& name, const std::string& method) {
  const auto [rel, bar] = relation(name, method);
  if (rel == Relation::kMatch) return "match";
  std::string out = rel == Relation::kSoundOnly ? "sound only" : "not looser " + fmt(bar, 2);
  for (const Deviation& d : deviations()) {
    if (name.find(d.case_part) != std::string::npos && method == d.method) {
      return out + ": " + d.why;
    }
  }
  return out;
}

// Worst differences of ours against the reference over the bounds of one method.
struct Gap {
  double looser = -1e300;  // max of (how much looser ours is)/max(|ref|, 0.1); < 0: all tighter
  double abs_diff = 0;     // max |ours − ref|
};

// Checks one side of one method against the reference (lower when `low`).
void check_side(const std::vector<double>& ours, const std::vector<double>& ref, bool low,
                std::pair<Relation, double> rel_bar, const std::string& what, Gap& gap) {
  const auto [rel, bar] = rel_bar;
  ASSERT_EQ(ours.size(), ref.size()) << what;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double looser = low ? ref[i] - ours[i] : ours[i] - ref[i];
    gap.looser = std::max(gap.looser, looser / std::max(std::abs(ref[i]), 1e-1));
    gap.abs_diff = std::max(gap.abs_diff, std::abs(ours[i] - ref[i]));
    const std::string at = what + (low ? " lower " : " upper ") + std::to_string(i) + ": ours " +
                           fmt(ours[i]) + ", auto_LiRPA " + fmt(ref[i]);
    if (rel == Relation::kMatch) {
      EXPECT_LE(std::abs(ours[i] - ref[i]), std::max(1e-4 * std::abs(ref[i]), 1e-5)) << at;
    } else if (rel == Relation::kNotLooser) {
      EXPECT_LE(looser, bar * std::abs(ref[i])) << at;
    }
  }
}

// Bounds contain the sampled minima and maxima (tolerance 1e-5·max(1, |value|), as the refs).
void expect_sound(const Interval& b, const nlohmann::json& sampled, const std::string& what) {
  const auto lo = sampled["min"].get<std::vector<double>>();
  const auto hi = sampled["max"].get<std::vector<double>>();
  const std::vector<double> l = values(b.lower);
  const std::vector<double> u = values(b.upper);
  ASSERT_EQ(l.size(), lo.size()) << what;
  for (size_t i = 0; i < lo.size(); ++i) {
    EXPECT_LE(l[i], lo[i] + 1e-5 * std::max(1.0, std::abs(lo[i]))) << what << " lower " << i;
    EXPECT_GE(u[i], hi[i] - 1e-5 * std::max(1.0, std::abs(hi[i]))) << what << " upper " << i;
  }
}

// Our own samples: 2000 uniform points and 500 random vertices of the box (seeded), through our
// float64 forward pass: [N, outputs].
at::Tensor sample_outputs(const nlohmann::json& ref, GeluForm form) {
  BoundGraph g = build_network(ref, form);
  g.to_dtype(at::kDouble);
  const Interval box = testing::reference_box(ref, at::kDouble);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(12);
  std::vector<int64_t> shape(box.lower.sizes().begin(), box.lower.sizes().end());
  const auto opts = at::TensorOptions().dtype(at::kDouble);
  shape[0] = 2000;
  const at::Tensor u = box.lower + (box.upper - box.lower) * at::rand(shape, gen, opts);
  shape[0] = 500;
  const at::Tensor v = at::where(at::rand(shape, gen, opts) < 0.5, box.upper, box.lower);
  return testing::outputs(g, at::cat({u, v}, 0), at::Tensor());
}

void expect_contains(const Interval& b, const at::Tensor& y, const std::string& what) {
  const at::Tensor slack = y.abs().clamp_min(1.0) * 1e-5;
  const at::Tensor below = y + slack < b.lower.to(at::kDouble);
  const at::Tensor above = y - slack > b.upper.to(at::kDouble);
  EXPECT_EQ(below.sum().item<int64_t>(), 0) << what << ": samples below the lower bounds";
  EXPECT_EQ(above.sum().item<int64_t>(), 0) << what << ": samples above the upper bounds";
}

struct Row {
  std::string name, method, relation;
  Gap gap;
  double ours_width = 0;
  double ref_width = 0;
};

Row check_method(const std::string& name, const std::string& method, const Interval& ours,
                 const nlohmann::json& ref) {
  const auto rel = relation(name, method);
  Row row{name, method, relation_name(name, method), {}, 0, 0};
  const nlohmann::json& r = ref[method];
  check_side(values(ours.lower), r["lower"].get<std::vector<double>>(), true, rel,
             name + " " + method, row.gap);
  check_side(values(ours.upper), r["upper"].get<std::vector<double>>(), false, rel,
             name + " " + method, row.gap);
  for (const char* key : {"sampled", "sampled_vertices"}) {
    expect_sound(ours, ref[key], name + " " + method + " vs " + key);
  }
  row.ours_width = (ours.upper - ours.lower).to(at::kDouble).mean().item<double>();
  const auto rl = r["lower"].get<std::vector<double>>();
  const auto ru = r["upper"].get<std::vector<double>>();
  for (size_t i = 0; i < rl.size(); ++i) row.ref_width += (ru[i] - rl[i]) / double(rl.size());
  return row;
}

// The table of ours against auto_LiRPA (widths are means of upper − lower; max looser is
// Gap::looser).
void print(const std::vector<Row>& rows) {
  std::cout << std::left << std::setw(34) << "case" << std::setw(12) << "method" << std::setw(14)
            << "ref width" << std::setw(14) << "our width" << std::setw(14) << "max |diff|"
            << std::setw(14) << "max looser"
            << "relation checked\n";
  for (const Row& r : rows) {
    std::cout << std::left << std::setw(34) << r.name << std::setw(12) << r.method << std::setw(14)
              << fmt(r.ref_width, 6) << std::setw(14) << fmt(r.ours_width, 6) << std::setw(14)
              << fmt(r.gap.abs_diff, 3) << std::setw(14) << fmt(r.gap.looser, 3) << r.relation
              << "\n";
  }
}

// Every case (and, for GELU, both ONNX spellings) against its reference.
TEST(OpReferences, MatchAutoLirpa) {
  c10::NoGradGuard no_grad;
  const auto files = case_files();
  ASSERT_GE(files.size(), 9U) << data_dir();
  std::vector<Row> rows;
  // Each GELU case's bounds of the Gelu operator (ibp, crown, alpha): the exported form must give
  // the same bits, being fused into the same node.
  std::vector<Interval> gelu_bounds;
  for (const auto& f : files) {
    const nlohmann::json ref = testing::read_json(f);
    const std::string base = f.stem().string();
    const bool gelu = base.rfind("gelu", 0) == 0;
    for (const GeluForm form : {GeluForm::kOperator, GeluForm::kErf}) {
      if (form == GeluForm::kErf && !gelu) continue;
      const std::string name = base + (gelu ? (form == GeluForm::kErf ? "/erf" : "/Gelu") : "");
      SCOPED_TRACE(name);
      const BoundGraph g = build_network(ref, form);
      const InputBox box = testing::reference_box(ref);
      const Interval ibp = compute_bounds(g, box, Method::kIbp);
      const Interval crown = compute_bounds(g, box, Method::kCrown);
      AlphaOptions ao;
      ao.iterations = ref["alpha_crown"]["iterations"].get<int>();
      ao.lr = ref["alpha_crown"]["lr_alpha"].get<double>();
      Interval alpha;
      {
        c10::AutoGradMode grad(true);
        alpha = alpha_crown(ao, {}, g, box).bounds;
      }
      if (gelu && form == GeluForm::kOperator) gelu_bounds = {ibp, crown, alpha};
      if (gelu && form == GeluForm::kErf) {
        const std::array<const Interval*, 3> ours{&ibp, &crown, &alpha};
        for (size_t i = 0; i < ours.size(); ++i) {
          EXPECT_TRUE(at::equal(ours.at(i)->lower, gelu_bounds.at(i).lower) &&
                      at::equal(ours.at(i)->upper, gelu_bounds.at(i).upper))
              << "method " << i << ": the exported form is not bounded as the Gelu node";
        }
      }
      const at::Tensor y = sample_outputs(ref, form);
      for (const auto& [method, b] : {std::pair<std::string, const Interval*>{"ibp", &ibp},
                                      {"crown", &crown},
                                      {"alpha_crown", &alpha}}) {
        rows.push_back(check_method(name, method, *b, ref));
        expect_contains(*b, y, name + " " + method);
      }
    }
  }
  print(rows);
}

// The forward pass at the box centre within 1e-5·max(1, |y|) of the float64 numpy evaluation
// (the graphs compute what the references bounded).
TEST(OpReferences, ForwardAtCentreMatchesFloat64) {
  c10::NoGradGuard no_grad;
  for (const auto& f : case_files()) {
    const nlohmann::json ref = testing::read_json(f);
    for (const GeluForm form : {GeluForm::kOperator, GeluForm::kErf}) {
      SCOPED_TRACE(f.stem().string() + (form == GeluForm::kErf ? " erf" : ""));
      BoundGraph g = build_network(ref, form);
      g.to_dtype(at::kDouble);
      const Interval box = testing::reference_box(ref, at::kDouble);
      const std::vector<double> y = values(g.forward((box.lower + box.upper) / 2));
      const auto want = ref["center_output"]["values"].get<std::vector<double>>();
      ASSERT_EQ(y.size(), want.size());
      for (size_t i = 0; i < y.size(); ++i) {
        EXPECT_NEAR(y[i], want[i], 1e-5 * std::max(1.0, std::abs(want[i]))) << "output " << i;
      }
    }
  }
}

}  // namespace
}  // namespace distcrown
