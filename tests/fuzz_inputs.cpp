// A fuzz driver for the two parsers a user feeds files to (the ONNX loader and the VNNLIB parser)
// and the bounding behind them, run by ctest on a seeded corpus: every case is loaded, checked
// against its property and bounded (IBP, CROWN); the only acceptable failure is one
// distcrown::Error with a one-line message (or an UnsupportedError's list, one line per node). A
// crash or a hang kills the run (ctest fails it), any other exception, another multi-line message
// or non-finite bounds are reported with the case's id and fail it.
//
//   fuzz_inputs [--cases N] [--seed S]     N mutated cases after the regression corpus (default
//   1500)
//
// The corpus: a regression case for each hostile input the hardening issue listed (Transpose
// perm out of range, dimension products that overflow, NaN/inf/3e38 weights, Gemm alpha NaN,
// division by zero, huge and non-finite VNNLIB numbers), then byte-level mutations (flips,
// truncations, duplicated and inserted runs) and structural mutations (dimensions, attributes,
// weights, op types, wiring, opsets) of a small model using every operator family, and token-level
// mutations of its property.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iterator>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "distcrown/io/onnx_loader.hpp"
#include "distcrown/io/problem.hpp"
#include "distcrown/io/vnnlib.hpp"
#include "distcrown/methods/compute_bounds.hpp"
#include "distcrown/util/error.hpp"
#include "error_text.hpp"
#include "io/onnx_build.hpp"

namespace distcrown {
namespace {

using io::attr_float;
using io::attr_int;
using io::attr_ints;
using io::attr_string;
using io::OnnxModel;

struct Case {
  std::string id;
  std::string model;     // serialized ONNX
  std::string property;  // VNNLIB text
};

void add_node(OnnxModel& m, const std::string& name, const std::string& op,
              std::vector<std::string> in, std::vector<io::OnnxAttribute> attrs = {}) {
  m.nodes.push_back({name, op, "", std::move(in), {name}, std::move(attrs)});
}

// x [1, 2, 4, 4] -> Conv 2->3 k3 p1 -> BatchNorm -> Relu -> Pad 1 -> MaxPool k2 -> AveragePool k2
// -> Transpose(0,1,3,2) -> Flatten -> Gemm 48->8 -> Sign -> Mul c -> Div d -> Sub e -> Add(skip)
// -> Concat(ConstantOfShape [1, 2]) -> Slice 1:9 -> Gather (a permutation) -> Split [3, 5] ->
// Concat (swapped) -> Unsqueeze -> ReduceMean -> Gemm 8->3 -> Neg -> Reshape [1,3].
OnnxModel base_model() {
  at::manual_seed(0);
  OnnxModel m;
  m.opset = 13;
  m.inputs.push_back({"x", true, io::kOnnxFloat, true, {1, 2, 4, 4}});
  m.outputs.push_back({"y", true, io::kOnnxFloat, true, {1, 3}});
  auto init = [&](const std::string& n, const at::Tensor& t) {
    m.initializers.push_back(io::onnx_tensor(n, t));
  };
  init("Wc", at::randn({3, 2, 3, 3}));
  init("bc", at::randn({3}));
  init("g", at::rand({3}) + 0.5);
  init("be", at::randn({3}));
  init("mu", at::randn({3}));
  init("var", at::rand({3}) + 0.5);
  init("W1", at::randn({8, 48}) * 0.2);
  init("b1", at::randn({8}));
  init("c", at::randn({8}));
  init("d", at::rand({8}) + 0.5);
  init("e", at::randn({8}));
  init("W2", at::randn({3, 8}));
  init("shape", at::tensor({1, 3}, at::kLong));
  init("pads", at::tensor({0, 0, 1, 1, 0, 0, 1, 1}, at::kLong));
  init("cshape", at::tensor({1, 2}, at::kLong));
  init("starts", at::tensor({1}, at::kLong));
  init("ends", at::tensor({9}, at::kLong));
  init("axes1", at::tensor({1}, at::kLong));
  init("perm8", at::tensor({7, 0, 1, 2, 3, 4, 5, 6}, at::kLong));
  init("lengths", at::tensor({3, 5}, at::kLong));
  init("axes2", at::tensor({2}, at::kLong));
  add_node(m, "conv", "Conv", {"x", "Wc", "bc"},
           {attr_ints("pads", {1, 1, 1, 1}), attr_ints("strides", {1, 1})});
  add_node(m, "bn", "BatchNormalization", {"conv", "g", "be", "mu", "var"},
           {attr_float("epsilon", 1e-5)});
  add_node(m, "relu", "Relu", {"bn"});
  add_node(m, "pad", "Pad", {"relu", "pads"}, {attr_string("mode", "constant")});
  add_node(m, "maxpool", "MaxPool", {"pad"},
           {attr_ints("kernel_shape", {2, 2}), attr_ints("strides", {1, 1})});
  add_node(m, "avgpool", "AveragePool", {"maxpool"},
           {attr_ints("kernel_shape", {2, 2}), attr_ints("pads", {0, 0, 0, 0})});
  add_node(m, "tr", "Transpose", {"avgpool"}, {attr_ints("perm", {0, 1, 3, 2})});
  add_node(m, "flat", "Flatten", {"tr"}, {attr_int("axis", 1)});
  add_node(m, "fc1", "Gemm", {"flat", "W1", "b1"}, {attr_int("transB", 1)});
  add_node(m, "sign", "Sign", {"fc1"});
  add_node(m, "mul", "Mul", {"sign", "c"});
  add_node(m, "div", "Div", {"mul", "d"});
  add_node(m, "sub", "Sub", {"div", "e"});
  add_node(m, "add", "Add", {"sub", "fc1"});
  add_node(m, "cos", "ConstantOfShape", {"cshape"},
           {io::attr_tensor("value", at::full({1}, 0.5, at::kFloat))});
  add_node(m, "cat", "Concat", {"add", "cos"}, {attr_int("axis", 1)});
  add_node(m, "slice", "Slice", {"cat", "starts", "ends", "axes1"});
  add_node(m, "gather", "Gather", {"slice", "perm8"}, {attr_int("axis", 1)});
  m.nodes.push_back(
      {"split", "Split", "", {"gather", "lengths"}, {"split0", "split1"}, {attr_int("axis", 1)}});
  add_node(m, "swap", "Concat", {"split1", "split0"}, {attr_int("axis", -1)});
  add_node(m, "unsq", "Unsqueeze", {"swap", "axes2"});
  add_node(m, "mean", "ReduceMean", {"unsq"}, {attr_ints("axes", {2}), attr_int("keepdims", 0)});
  add_node(m, "fc2", "Gemm", {"mean", "W2"}, {attr_int("transB", 1)});
  add_node(m, "neg", "Neg", {"fc2"});
  add_node(m, "y", "Reshape", {"neg", "shape"});
  return m;
}

std::string base_property() {
  std::string s;
  for (int i = 0; i < 32; ++i) s += "(declare-const X_" + std::to_string(i) + " Real)\n";
  for (int j = 0; j < 3; ++j) s += "(declare-const Y_" + std::to_string(j) + " Real)\n";
  for (int i = 0; i < 32; ++i) {
    s += "(assert (>= X_" + std::to_string(i) + " -0.1))\n(assert (<= X_" + std::to_string(i) +
         " 0.2))\n";
  }
  s += "(assert (or (and (>= Y_0 Y_1)) (and (<= Y_2 -1.5))))\n";
  return s;
}

// The regression corpus: one case per hostile input the hardening issue found.
std::vector<Case> regression_cases() {
  std::vector<Case> out;
  const std::string prop = base_property();
  auto with = [&](const std::string& id, const std::function<void(OnnxModel&)>& change) {
    OnnxModel m = base_model();
    change(m);
    out.push_back({id, io::serialize_onnx_model(m), prop});
  };
  auto node = [](OnnxModel& m, const std::string& name) -> io::OnnxNode& {
    for (auto& n : m.nodes) {
      if (n.name == name) return n;
    }
    throw std::logic_error("no node " + name);
  };
  auto tensor = [](OnnxModel& m, const std::string& name) -> io::OnnxTensor& {
    for (auto& t : m.initializers) {
      if (t.name == name) return t;
    }
    throw std::logic_error("no initializer " + name);
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (const std::vector<int64_t>& perm : {std::vector<int64_t>{0, 1, 3, 7},
                                           {0, 1, 3, -1},
                                           {0, 1, 1, 2},
                                           {0, 1, 2},
                                           {0, 1, 2, 3, 4}}) {
    with("transpose_perm",
         [&](OnnxModel& m) { node(m, "tr").attributes = {attr_ints("perm", perm)}; });
  }
  for (const std::vector<int64_t>& dims : {std::vector<int64_t>{int64_t{1} << 32, int64_t{1} << 32},
                                           {int64_t{1} << 62, 4},
                                           {1, 1, 1, int64_t{1} << 40},
                                           {-3}}) {
    with("initializer_dims", [&](OnnxModel& m) { tensor(m, "b1").dims = dims; });
    with("input_dims", [&](OnnxModel& m) { m.inputs[0].dims = dims; });
  }
  for (double v : {nan, inf, -inf, 3e38}) {
    with("weight_value", [&](OnnxModel& m) {
      io::OnnxTensor& t = tensor(m, "W1");
      at::Tensor w = at::randn({8, 48});
      w[3][5] = v;
      t = io::onnx_tensor("W1", w);
    });
  }
  // fc1 as a MatMul of one input, then of its input and a bounded tensor of the wrong shape (the
  // two-variable MatMul lowering once read a missing input).
  with("matmul_one_input", [&](OnnxModel& m) {
    io::OnnxNode& n = node(m, "fc1");
    n.op_type = "MatMul";
    n.inputs = {"flat"};
    n.attributes.clear();
  });
  with("matmul_two_variables_bad_shapes", [&](OnnxModel& m) {
    io::OnnxNode& n = node(m, "fc1");
    n.op_type = "MatMul";
    n.inputs = {"flat", "flat"};
    n.attributes.clear();
  });
  with("weights_3e38", [&](OnnxModel& m) {
    tensor(m, "W2") = io::onnx_tensor("W2", at::full({3, 8}, 3e38));
    tensor(m, "W1") = io::onnx_tensor("W1", at::full({8, 48}, 3e38));
  });
  with("gemm_alpha_nan",
       [&](OnnxModel& m) { node(m, "fc1").attributes.push_back(attr_float("alpha", nan)); });
  with("gemm_beta_inf",
       [&](OnnxModel& m) { node(m, "fc1").attributes.push_back(attr_float("beta", inf)); });
  // Found by this driver (seed 2): Unsqueeze axes out of range inserted past the end of a vector.
  for (const std::vector<int64_t>& axes : {std::vector<int64_t>{5}, {-9}, {1, 1}}) {
    with("unsqueeze_axes", [&](OnnxModel& m) {
      m.initializers.push_back(io::onnx_tensor("ax", at::tensor(axes, at::kLong)));
      io::OnnxNode& n = node(m, "fc2");
      n.op_type = "Unsqueeze";
      n.inputs = {"add", "ax"};
      n.attributes.clear();
    });
  }
  with("unsqueeze_float_axes", [&](OnnxModel& m) {
    io::OnnxNode& n = node(m, "fc2");
    n.op_type = "Unsqueeze";
    n.attributes.clear();
  });
  // Found by this driver: a batch dimension of 7 escaped as a LibTorch reshape error; names with
  // control characters made multi-line messages.
  with("input_batch_7", [&](OnnxModel& m) { m.inputs[0].dims[0] = 7; });
  with("name_with_newline", [&](OnnxModel& m) {
    io::OnnxNode& n = node(m, "tr");
    n.attributes = {attr_ints("perm", {0, 0, 1, 2})};
    n.name = "t\nr";
  });
  with("division_by_zero",
       [&](OnnxModel& m) { tensor(m, "d") = io::onnx_tensor("d", at::zeros({8})); });
  // Found by this driver (seeds 8 and 11 at 3000 cases): a one-byte change of a shape value made
  // ConstantOfShape build 1e9 elements, and CROWN through the Concat they feed ask for 33 GB; and
  // the same risk from broadcasting two constants.
  with("constant_of_shape_huge", [&](OnnxModel& m) {
    tensor(m, "cshape") =
        io::onnx_tensor("cshape", at::tensor(std::vector<int64_t>{1, 1040187394}, at::kLong));
  });
  with("broadcast_square", [&](OnnxModel& m) {
    m.initializers.push_back(io::onnx_tensor("row", at::zeros({1, 1 << 13})));
    m.initializers.push_back(io::onnx_tensor("col", at::zeros({1 << 13, 1})));
    m.nodes.insert(m.nodes.begin(), {"square", "Add", "", {"row", "col"}, {"square"}, {}});
    node(m, "mul").inputs[1] = "square";
  });
  const std::string model = io::serialize_onnx_model(base_model());
  for (const char* value : {"1e308", "-1e308", "1e400", "nan", "inf", "-inf", "1e-400"}) {
    std::string p = prop;
    p.replace(p.find("0.2"), 3, value);
    out.push_back({std::string("vnnlib_number_") + value, model, p});
  }
  out.push_back({"base", model, prop});
  return out;
}

class Mutator {
 public:
  explicit Mutator(uint64_t seed) : rng_(seed) {}

  int64_t below(int64_t n) { return std::uniform_int_distribution<int64_t>(0, n - 1)(rng_); }

  std::string bytes(std::string s) {
    const int64_t edits = 1 + below(4);
    for (int64_t e = 0; e < edits && !s.empty(); ++e) {
      const auto at = size_t(below(int64_t(s.size())));
      switch (below(4)) {
        case 0:
          s[at] = char(below(256));
          break;
        case 1:
          s.resize(at);
          break;
        case 2:
          s.insert(at, s.substr(at, size_t(below(16))));
          break;
        default:
          s.insert(at, std::string(size_t(1 + below(8)), char(below(256))));
      }
    }
    return s;
  }

  int64_t hostile_int() {
    static const int64_t values[] = {0,
                                     -1,
                                     1,
                                     2,
                                     3,
                                     7,
                                     64,
                                     -7,
                                     int64_t{1} << 31,
                                     int64_t{1} << 40,
                                     std::numeric_limits<int64_t>::max(),
                                     std::numeric_limits<int64_t>::min()};
    return values[below(std::size(values))];
  }

  double hostile_double() {
    static const double values[] = {0,
                                    -1,
                                    1e-45,
                                    3e38,
                                    1e308,
                                    -1e308,
                                    std::numeric_limits<double>::quiet_NaN(),
                                    std::numeric_limits<double>::infinity()};
    return values[below(std::size(values))];
  }

  OnnxModel structure(OnnxModel m) {
    switch (below(7)) {
      case 0: {  // a dimension of an initializer or the input
        std::vector<int64_t>& dims =
            below(2) == 0 || m.initializers.empty()
                ? m.inputs[0].dims
                : m.initializers[size_t(below(int64_t(m.initializers.size())))].dims;
        if (dims.empty() || below(3) == 0) {
          dims.push_back(hostile_int());
        } else {
          dims[size_t(below(int64_t(dims.size())))] = hostile_int();
        }
        break;
      }
      case 1: {  // an attribute value
        io::OnnxNode& n = m.nodes[size_t(below(int64_t(m.nodes.size())))];
        if (n.attributes.empty() || below(3) == 0) {
          static const char* names[] = {"axis",    "perm",   "pads",   "strides", "dilations",
                                        "group",   "transA", "transB", "alpha",   "beta",
                                        "epsilon", "to",     "axes"};
          const char* name = names[below(std::size(names))];
          n.attributes.push_back(below(2) == 0 ? attr_int(name, hostile_int())
                                               : attr_ints(name, {hostile_int(), hostile_int()}));
        } else {
          io::OnnxAttribute& a = n.attributes[size_t(below(int64_t(n.attributes.size())))];
          a.i = hostile_int();
          a.f = hostile_double();
          for (int64_t& v : a.ints) v = below(2) == 0 ? v : hostile_int();
          if (below(3) == 0) a.ints.push_back(hostile_int());
        }
        break;
      }
      case 2: {  // a weight value
        io::OnnxTensor& t = m.initializers[size_t(below(int64_t(m.initializers.size())))];
        if (t.data_type == io::kOnnxFloat && t.bytes.size() >= 4) {
          const auto v = float(hostile_double());
          std::memcpy(t.bytes.data() + 4 * below(int64_t(t.bytes.size() / 4)), &v, 4);
        } else if (!t.bytes.empty()) {
          t.bytes[size_t(below(int64_t(t.bytes.size())))] = char(below(256));
        }
        break;
      }
      case 3: {  // an operator type
        static const char* ops[] = {"Relu",
                                    "LeakyRelu",
                                    "Sign",
                                    "Floor",
                                    "Ceil",
                                    "Gemm",
                                    "MatMul",
                                    "Conv",
                                    "Add",
                                    "Sub",
                                    "Mul",
                                    "Div",
                                    "Neg",
                                    "Flatten",
                                    "Reshape",
                                    "Transpose",
                                    "Identity",
                                    "Constant",
                                    "Gather",
                                    "Concat",
                                    "Slice",
                                    "Squeeze",
                                    "Unsqueeze",
                                    "Shape",
                                    "Cast",
                                    "Dropout",
                                    "BatchNormalization",
                                    "Sigmoid",
                                    "MaxPool",
                                    "AveragePool",
                                    "GlobalAveragePool",
                                    "Pad",
                                    "Split",
                                    "ReduceSum",
                                    "ReduceMean",
                                    "ConstantOfShape",
                                    "Equal",
                                    "Where",
                                    "Expand",
                                    "Range",
                                    "Tanh",
                                    "Exp",
                                    "Reciprocal"};
        m.nodes[size_t(below(int64_t(m.nodes.size())))].op_type = ops[below(std::size(ops))];
        break;
      }
      case 4: {  // the wiring
        io::OnnxNode& n = m.nodes[size_t(below(int64_t(m.nodes.size())))];
        const io::OnnxNode& other = m.nodes[size_t(below(int64_t(m.nodes.size())))];
        if (!n.inputs.empty()) n.inputs[size_t(below(int64_t(n.inputs.size())))] = other.name;
        if (below(3) == 0) n.inputs.push_back(below(2) == 0 ? "" : "x");
        break;
      }
      case 5:
        m.opset = hostile_int();
        break;
      default:  // data type of an initializer
        m.initializers[size_t(below(int64_t(m.initializers.size())))].data_type =
            int32_t(below(17));
    }
    return m;
  }

  std::string tokens(std::string s) {
    static const char* values[] = {"1e308", "-1e308", "1e999",  "nan",    "inf", "(",
                                   ")",     "X_99",   "Y_7",    "and",    "or",  "",
                                   "0x1p3", "-",      "1e-999", "X_\x01", "\"",  ";"};
    const int64_t edits = 1 + below(3);
    for (int64_t e = 0; e < edits && !s.empty(); ++e) {
      const auto at = size_t(below(int64_t(s.size())));
      const size_t end = s.find_first_of(" ()\n", at);
      s.replace(at, (end == std::string::npos ? s.size() : end) - at,
                values[below(std::size(values))]);
    }
    return s;
  }

 private:
  std::mt19937_64 rng_;
};

// Runs one case; returns "" when it behaved, else what went wrong. `bounded` counts the cases that
// got through to finite bounds, `refused` those refused with an Error.
std::string run_case(const Case& c, int& bounded, int& refused) {
  try {
    const BoundGraph g = io::load_onnx_bytes(c.model, c.id + ".onnx");
    const io::VnnlibProperty p = io::parse_vnnlib_string(c.property, c.id + ".vnnlib");
    io::check_fits(g, p);
    const InputBox box = io::enclosing_box(p.cases.front(), g, g.dtype());
    for (Method method : {Method::kIbp, Method::kCrown}) {
      const Interval b = compute_bounds(g, box, method);  // throws NumericError on NaN/inf
      if (!at::isfinite(b.lower).all().item<bool>() || !at::isfinite(b.upper).all().item<bool>()) {
        return "non-finite bounds returned";
      }
    }
    ++bounded;
  } catch (const Error& e) {
    ++refused;
    const std::string what = e.what();
    if (!testing::is_well_formed_error(what)) {
      return "error message not one line (or a list of unsupported nodes): " + what;
    }
  } catch (const c10::Error& e) {
    return std::string("LibTorch error escaped: ") + e.what_without_backtrace();
  } catch (const std::exception& e) {
    return std::string("std::exception escaped: ") + e.what();
  }
  return "";
}

}  // namespace
}  // namespace distcrown

int main(int argc, char** argv) {
  using namespace distcrown;
  int64_t n = 1500;
  uint64_t seed = 1;
  bool verbose = false;  // --verbose 1: each case's id before it runs (to find a crashing one)
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--verbose") verbose = std::atoi(argv[i + 1]) != 0;
    if (flag == "--cases") n = std::atoll(argv[i + 1]);
    if (flag == "--seed") seed = std::strtoull(argv[i + 1], nullptr, 10);
  }
  at::set_num_threads(1);
  c10::NoGradGuard no_grad;
  std::vector<Case> cases = regression_cases();
  const size_t regression = cases.size();
  Mutator mut(seed);
  const OnnxModel base = base_model();
  const std::string model = io::serialize_onnx_model(base);
  const std::string prop = base_property();
  int failures = 0;
  int bounded = 0;
  int refused = 0;
  auto run = [&](const Case& c) {
    if (verbose) {
      // The case about to run, kept on disk so that a crashing one can be replayed.
      std::fprintf(stderr, "case %s\n", c.id.c_str());
      std::FILE* f = std::fopen("fuzz_case.onnx", "wb");
      if (f != nullptr) {
        std::fwrite(c.model.data(), 1, c.model.size(), f);
        std::fclose(f);
      }
      f = std::fopen("fuzz_case.vnnlib", "wb");
      if (f != nullptr) {
        std::fwrite(c.property.data(), 1, c.property.size(), f);
        std::fclose(f);
      }
    }
    const std::string bad = run_case(c, bounded, refused);
    if (!bad.empty()) {
      ++failures;
      std::fprintf(stderr, "FAIL %s: %s\n", c.id.c_str(), bad.c_str());
    }
  };
  for (const Case& c : cases) run(c);
  // The unmutated case must get through, or the mutations test nothing.
  int base_bounded = 0;
  int base_refused = 0;
  const std::string base_problem = run_case(cases.back(), base_bounded, base_refused);
  if (base_bounded != 1) {
    std::fprintf(stderr, "FAIL: the base case does not bound: %s\n", base_problem.c_str());
    ++failures;
  }
  for (int64_t i = 0; i < n; ++i) {
    Case c;
    c.id = "mutation_" + std::to_string(seed) + "_" + std::to_string(i);
    switch (mut.below(3)) {
      case 0:
        c.model = mut.bytes(model);
        c.property = prop;
        break;
      case 1:
        c.model =
            io::serialize_onnx_model(mut.structure(mut.below(2) == 0 ? base : mut.structure(base)));
        c.property = prop;
        break;
      default:
        c.model = model;
        c.property = mut.tokens(prop);
    }
    run(c);
  }
  std::printf(
      "fuzz_inputs: %zu regression cases and %lld mutations (seed %llu): %d bounded, %d refused "
      "with one-line errors, %d failures\n",
      regression, static_cast<long long>(n), static_cast<unsigned long long>(seed), bounded,
      refused, failures);
  return failures == 0 ? 0 : 1;
}
