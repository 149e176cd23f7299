// verify() (bab/verifier.hpp): trivially true and false properties, timeouts (library and CLI,
// on a fixture instance nobody decides), counterexamples checked against the constraint as
// written (not its float32 rounding), fixed inputs float32 cannot represent, and the VNN-COMP
// result text.

#include "bab_testing.hpp"

namespace distcrown {
namespace {

using namespace bab_testing;
using testing::fmt;

TEST(FormatResult, SatListsTheCounterexample) {
  bab::VerifyResult r;
  r.verdict = bab::Verdict::kSat;
  r.counterexample = bab::Counterexample{{0.5, -1.25}, {3.0, 0.125, -2.0}};
  const std::string s = bab::format_result(r, {});
  EXPECT_EQ(s.rfind("sat\n", 0), 0u) << s;
  EXPECT_EQ(s, "sat\n((X_0 0.5)\n (X_1 -1.25)\n (Y_0 3)\n (Y_1 0.125)\n (Y_2 -2))\n");
  // Values round-trip in double.
  r.counterexample = bab::Counterexample{{0.1}, {1.0 / 3.0}};
  const std::string t = bab::format_result(r, {});
  double x = 0, y = 0;
  ASSERT_EQ(std::sscanf(t.c_str(), "sat\n((X_0 %lf)\n (Y_0 %lf))", &x, &y), 2) << t;
  EXPECT_EQ(x, 0.1);
  EXPECT_EQ(y, 1.0 / 3.0);
}

// A VNN-LIB 2.0 property's counterexample: one "name[index]=value" line per element, the input
// tensor's then the output's, as the 2.0 standard's command line prints it.
TEST(FormatResult, SatOfAVnnlib2PropertyNamesTheTensorsElements) {
  const io::VnnlibProperty p = io::parse_vnnlib_string(
      "(vnnlib-version <2.0>)\n(declare-network f (declare-input X real [1, 2]) "
      "(declare-output Y real [3]))\n(assert (<= X[0, 0] 1))(assert (>= X[0,0] 0))"
      "(assert (<= X[0, 1] 1))(assert (>= X[0, 1] 0))(assert (< Y[2] Y[0]))");
  bab::VerifyResult r;
  r.verdict = bab::Verdict::kSat;
  r.counterexample = bab::Counterexample{{0.5, -1.25}, {3.0, 0.125, -2.0}};
  EXPECT_EQ(bab::format_result(r, p),
            "sat\nX[0,0]=0.5\nX[0,1]=-1.25\nY[0]=3\nY[1]=0.125\nY[2]=-2\n");
}

TEST(FormatResult, OtherVerdictsAreOneLine) {
  bab::VerifyResult r;
  r.verdict = bab::Verdict::kUnsat;
  EXPECT_EQ(bab::format_result(r, {}), "unsat\n");
  r.verdict = bab::Verdict::kTimeout;
  EXPECT_EQ(bab::format_result(r, {}), "timeout\n");
  r.verdict = bab::Verdict::kUnknown;
  EXPECT_EQ(bab::format_result(r, {}), "unknown\n");
}

TEST(Verify, TriviallyTrueIsUnsatTriviallyFalseIsSat) {
  const std::vector<Layer> layers = random_layers({6, 16, 16, 3}, 4);
  const Net net = build(layers);
  at::Generator gen = at::detail::createCPUGenerator(4);
  const InputBox box = box_around(gen, 6, 0.3);
  const Interval ibp = ibp_bounds(net.graph, box);
  c10::NoGradGuard no_grad;
  const std::vector<double> y0 = as_vector(net.graph.forward((box.lower + box.upper) / 2));
  const std::vector<double> e0{1.0, 0.0, 0.0};
  for (const auto split : {bab::SplitMode::kRelu, bab::SplitMode::kInput}) {
    SCOPED_TRACE(split == bab::SplitMode::kRelu ? "relu splits" : "input splits");
    bab::VerifyOptions o;
    o.timeout_s = 60;
    o.split = split;
    // Unsafe: Y_0 ≤ IBP lower − 1 — impossible.
    const auto t = property_of(box, 3, {{{{e0, ibp.lower[0][0].item<double>() - 1}}}});
    const bab::VerifyResult rt = bab::verify(net.graph, t, o);
    EXPECT_EQ(bab::to_string(rt.verdict), "unsat") << rt.detail;
    EXPECT_FALSE(rt.counterexample.has_value());
    // Unsafe: Y_0 ≤ value at the centre + 1 — the centre is a counterexample.
    const auto f = property_of(box, 3, {{{{e0, y0[0] + 1}}}});
    const bab::VerifyResult rf = bab::verify(net.graph, f, o);
    ASSERT_EQ(bab::to_string(rf.verdict), "sat") << rf.detail;
    ASSERT_TRUE(rf.counterexample.has_value());
    EXPECT_TRUE(inside(rf.counterexample->x, f.cases[0]));
    const at::Tensor x = at::tensor(rf.counterexample->x, at::kDouble).reshape({1, 6});
    const auto again = bab::check_candidates(net.graph, f.cases[0], x.to(at::kFloat));
    ASSERT_TRUE(again.has_value());
    // The same point; its output from a forward pass of another batch size (float32 GEMMs
    // round differently).
    EXPECT_EQ(again->x, rf.counterexample->x);
    ASSERT_EQ(again->y.size(), rf.counterexample->y.size());
    for (size_t j = 0; j < again->y.size(); ++j) {
      EXPECT_NEAR(again->y[j], rf.counterexample->y[j],
                  kTol * std::max(1.0, std::abs(again->y[j])));
    }
    EXPECT_EQ(bab::format_result(rf, {}).rfind("sat\n((X_0 ", 0), 0u);
  }
}

// kAuto splits the inputs when a case leaves few of them free (nn4sys's pensieve fixes 64 of
// 96), whatever the network's input size; kInput and kRelu are obeyed.
TEST(Verify, AutoSplitsInputsWhenFewAreFree) {
  const Net net = build(random_layers({40, 8, 2}, 3));
  io::VnnlibProperty p;
  p.num_inputs = 40;
  p.num_outputs = 2;
  io::VnnlibCase c;
  c.input_lower.assign(40, 0.5);
  c.input_upper.assign(40, 0.5);
  for (size_t i = 0; i < 32; ++i) c.input_upper[i] = 1.0;
  p.cases.push_back(c);
  bab::VerifyOptions o;
  EXPECT_EQ(bab::free_inputs(p), 32);
  EXPECT_TRUE(bab::splits_inputs(o, net.graph, p));
  p.cases.push_back(c);
  p.cases.back().input_upper[32] = 1.0;  // 33 free in the second case
  EXPECT_EQ(bab::free_inputs(p), 33);
  EXPECT_FALSE(bab::splits_inputs(o, net.graph, p));
  o.split = bab::SplitMode::kInput;
  EXPECT_TRUE(bab::splits_inputs(o, net.graph, p));
  p.cases.pop_back();
  o.split = bab::SplitMode::kRelu;
  EXPECT_FALSE(bab::splits_inputs(o, net.graph, p));
}

TEST(Verify, TimeoutOnAnUndecidedFixture) {
  DISTCROWN_REQUIRE_FIXTURES();
  const auto model = testing::fixtures_dir() / "models" / "mnist_256x6.onnx";
  const auto spec = testing::fixtures_dir() / "specs" / "mnist_prop_2_0.05.vnnlib";
  {  // The library.
    const io::Problem p = io::load_problem(model.string(), spec.string());
    bab::VerifyOptions o;
    o.timeout_s = 2;
    const auto start = std::chrono::steady_clock::now();
    const bab::VerifyResult r = bab::verify(p.graph, p.property, o);
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(bab::to_string(r.verdict), "timeout") << r.detail;
    EXPECT_LT(secs, 2 + 5.0) << r.detail;
    std::cout << "  verify(): " << secs << " s, " << r.detail << "\n";
  }
  {  // The CLI.
    testing::TempDir dir;
    const auto out = dir / "result.txt";
    const auto start = std::chrono::steady_clock::now();
    const testing::ProcessResult r =
        testing::run_captured(testing::shell_quote(DISTCROWN_CLI_PATH) + " verify --model " +
                                  testing::shell_quote(model.string()) + " --vnnlib " +
                                  testing::shell_quote(spec.string()) + " --timeout 3 --result " +
                                  testing::shell_quote(out.string()),
                              dir.path());
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_LT(secs, 3 + 5.0) << r.err;
    std::cout << "  distcrown verify: " << secs << " s\n";
    const std::string text = testing::read_file(out);
    EXPECT_EQ(text.substr(0, text.find('\n')), "timeout") << text;
    EXPECT_EQ(r.out, text);
  }
}

TEST(Verify, CounterexampleSatisfiesTheConstraintAsWritten) {
  // A single point (zero-width box) and a network whose arithmetic is exact there (weights,
  // biases and input multiples of 1/8): Y_0 = v exactly. The unsafe set Y_0 <= v − 1e-9 is empty
  // as written, but float32 rounds its rhs to v. "sat" would report a point that violates its
  // own constraint (attack.hpp: the check is in double).
  std::vector<Layer> layers = random_layers({3, 4, 2}, 6);
  for (Layer& l : layers) {
    l.W = at::round(l.W * 16) / 8;
    l.b = at::round(l.b * 16) / 8;
  }
  const Net net = build(layers);
  const at::Tensor x = row({0.25, -0.5, 0.75});
  const double v =
      at::matmul(at::relu(at::matmul(x.to(at::kDouble), layers[0].W.t()) + layers[0].b),
                 layers[1].W.t())[0][0]
          .item<double>() +
      layers[1].b[0].item<double>();
  {
    c10::NoGradGuard no_grad;
    ASSERT_EQ(net.graph.forward(x)[0][0].item<double>(), v) << "not exact";
  }
  const double rhs = v - 1e-9;
  ASSERT_EQ(double(float(rhs)), v) << "pick another rhs";
  const io::VnnlibProperty p = property_of({x, x}, 2, {{{{{1.0, 0.0}, rhs}}}});
  bab::VerifyOptions o;
  o.timeout_s = 10;
  o.split = bab::SplitMode::kRelu;
  const bab::VerifyResult r = bab::verify(net.graph, p, o);
  EXPECT_NE(bab::to_string(r.verdict), "sat")
      << "counterexample Y_0 = " << fmt(r.counterexample ? r.counterexample->y[0] : 0.0)
      << " > rhs " << fmt(rhs) << " (" << r.detail << ")";
}

// A CNN whose box fixes two inputs at values float32 cannot represent (0.1 and 0.2, lower =
// upper; the collins_rul_cnn case) with a property that holds only at the exact point: y = 0.1
// exactly, computed in double (y = 0.25·2·X_0 + 0.125·2·X_1 = 0.05 + 0.05). The float32 rounding
// of the point leaves the box and misses y = 0.1; the check snaps to the exact box and evaluates
// there in double.
TEST(FixedInputs, Float32CannotRepresentThemInACnn) {
  testing::OnnxBuilder m;
  m.input("x", {1, 1, 2, 2}).output("y");
  m.initializer("Wc", at::full({1, 1, 1, 1}, 2.0F));
  m.initializer("bc", at::zeros({1}));
  m.initializer("Wf", at::tensor({0.25F, 0.125F, 0.0F, 0.0F}).reshape({1, 4}));
  m.initializer("shape", at::tensor({int64_t{1}, int64_t{4}}));
  m.node("conv", "Conv", {"x", "Wc", "bc"}, {"c"}, {io::attr_ints("kernel_shape", {1, 1})});
  m.node("relu", "Relu", {"c"}, {"r"});
  m.node("flat", "Reshape", {"r", "shape"}, {"f"});
  m.node("fc", "Gemm", {"f", "Wf"}, {"y"}, {io::attr_int("transB", 1)});
  const BoundGraph g = io::load_onnx_bytes(m.bytes(), "fixed_cnn.onnx");
  ASSERT_EQ(g.dtype(), at::kFloat);
  const io::VnnlibProperty p = io::parse_vnnlib_string(
      "(declare-const X_0 Real)\n(declare-const X_1 Real)\n(declare-const X_2 Real)\n"
      "(declare-const X_3 Real)\n(declare-const Y_0 Real)\n"
      "(assert (>= X_0 0.1))\n(assert (<= X_0 0.1))\n(assert (>= X_1 0.2))\n"
      "(assert (<= X_1 0.2))\n(assert (>= X_2 0))\n(assert (<= X_2 1))\n(assert (>= X_3 0))\n"
      "(assert (<= X_3 1))\n(assert (>= Y_0 0.1))\n(assert (<= Y_0 0.1))\n",
      "fixed_cnn.vnnlib");
  ASSERT_NE(double(float(0.1)), 0.1);
  // The candidate as float32 holds (the rounding of the fixed values) and is clamped back.
  const at::Tensor x = at::tensor({0.1F, 0.2F, 0.5F, 0.5F}).reshape({1, 1, 2, 2});
  const auto cex = bab::check_candidates(g, p.cases[0], x);
  ASSERT_TRUE(cex.has_value()) << "the exact point was not checked in double";
  EXPECT_TRUE(inside(cex->x, p.cases[0]));
  EXPECT_EQ(cex->x.at(0), 0.1);
  EXPECT_EQ(cex->x.at(1), 0.2);
  EXPECT_EQ(cex->y.at(0), 0.1);
  // And verify() says sat.
  bab::VerifyOptions o;
  o.timeout_s = 20;
  o.bab.progress = false;
  const bab::VerifyResult r = bab::verify(g, p, o);
  EXPECT_EQ(bab::to_string(r.verdict), "sat") << r.detail;
}

// A model ending in Softmax, with a property that only compares outputs, loads without it when
// asked (its logits keep the order of the softmax); softmax_outputs gives the model's outputs
// back, and violated_at checks the property as written on them.
TEST(OutputSoftmax, PeeledOnlyWhereThePropertyComparesOutputs) {
  testing::OnnxBuilder b;
  b.input("x", {1, 2}).output("y", {1, 3});
  b.initializer("W", at::tensor({1.0F, 0.0F, 0.0F, 1.0F, 1.0F, 1.0F}).reshape({3, 2}));
  b.node("fc", "Gemm", {"x", "W"}, {"z"}, {testing::attr_int("transB", 1)});
  b.node("soft", "Softmax", {"z"}, {"y"}, {testing::attr_int("axis", 1)});
  const io::LoadedOnnx kept = io::load_onnx_bytes(b.bytes(), "soft.onnx", {});
  const io::LoadedOnnx peeled =
      io::load_onnx_bytes(b.bytes(), "soft.onnx", {.peel_output_softmax = true});
  EXPECT_FALSE(kept.output_softmax_peeled);
  ASSERT_TRUE(peeled.output_softmax_peeled);
  c10::NoGradGuard no_grad;
  const at::Tensor x = at::tensor({0.5F, -1.0F}).reshape({1, 2});
  const at::Tensor z = peeled.graph.forward(x);
  EXPECT_TRUE(at::allclose(z, at::tensor({0.5F, -1.0F, -0.5F}).reshape({1, 3})));
  const std::vector<double> y = io::softmax_outputs({0.5, -1.0, -0.5}, at::kFloat);
  const at::Tensor want = kept.graph.forward(x).to(at::kDouble).reshape({-1});
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(y[i], want[int64_t(i)].item<double>(), 1e-7);

  const auto property = [](const std::string& rows) {
    return io::parse_vnnlib_string(
        "(declare-const X_0 Real)\n(declare-const X_1 Real)\n(declare-const Y_0 Real)\n"
        "(declare-const Y_1 Real)\n(declare-const Y_2 Real)\n(assert (>= X_0 0))\n"
        "(assert (<= X_0 1))\n(assert (>= X_1 -1))\n(assert (<= X_1 0))\n" +
            rows,
        "soft.vnnlib");
  };
  const io::VnnlibProperty pairwise = property("(assert (or (>= Y_1 Y_0) (>= Y_2 Y_0)))\n");
  EXPECT_TRUE(io::compares_outputs_only(pairwise));
  EXPECT_FALSE(io::compares_outputs_only(property("(assert (>= Y_1 0.5))\n")));
  EXPECT_FALSE(io::compares_outputs_only(property("(assert (> Y_1 Y_0))\n")));
  EXPECT_FALSE(io::compares_outputs_only(property("(assert (and (>= Y_1 Y_0) (>= Y_2 0.1)))\n")));
  // At x = (0.5, -1): y_0 is the largest, neither disjunct holds; at (0, 0) y_2 > y_0.
  EXPECT_FALSE(bab::violated_at(pairwise, {0.5, -1.0}, y));
  EXPECT_TRUE(bab::violated_at(pairwise, {0.0, 0.0}, io::softmax_outputs({0, 0, 0}, at::kFloat)));
  EXPECT_FALSE(bab::violated_at(pairwise, {2.0, 0.0}, io::softmax_outputs({0, 0, 0}, at::kFloat)))
      << "outside the box";
}

}  // namespace
}  // namespace distcrown
