#include "onnx_gelu_fusion.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <map>
#include <numbers>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace distcrown::io {
namespace {

// The opset whose Gelu (approximate = "none") the fused node is.
constexpr int64_t kGeluOpset = 20;
// A constant matches a value v when |c − v| ≤ kTolerance·|v|: v's float32 rounding.
constexpr double kTolerance = 0x1p-24;

// The value of a one-element float32 / float64 tensor of rank ≤ 1; none otherwise. A [1]-shaped
// constant leaves the shape of x, which is bounded and so has a batch dimension, as it is.
std::optional<double> scalar_of(const OnnxTensor& t) {
  if (t.external || t.dims.size() > 1 || (t.dims.size() == 1 && t.dims[0] != 1)) return {};
  if (t.data_type == kOnnxFloat && t.bytes.size() == sizeof(float)) {
    float v = 0;
    std::memcpy(&v, t.bytes.data(), sizeof v);
    return double(v);
  }
  if (t.data_type == kOnnxDouble && t.bytes.size() == sizeof(double)) {
    double v = 0;
    std::memcpy(&v, t.bytes.data(), sizeof v);
    return v;
  }
  return {};
}

bool in_default_domain(const OnnxNode& n) { return n.domain.empty() || n.domain == "ai.onnx"; }

// What the matcher knows of the graph: producers, uses, scalar constants, variable tensors.
class GraphIndex {
 public:
  explicit GraphIndex(const OnnxModel& m) : model_(m) {
    std::set<std::string> initializers;
    for (const OnnxTensor& t : m.initializers) {
      single_definitions_ = initializers.insert(t.name).second && single_definitions_;
      if (auto v = scalar_of(t)) scalars_[t.name] = *v;
    }
    std::set<std::string> defined = initializers;
    for (const OnnxValueInfo& vi : m.inputs) {
      if (!initializers.count(vi.name)) {
        variable_.insert(vi.name);
        defined.insert(vi.name);
      }
    }
    for (const OnnxValueInfo& vi : m.outputs) uses_[vi.name] += 2;  // a graph output is kept
    for (size_t i = 0; i < m.nodes.size(); ++i) {
      const OnnxNode& n = m.nodes[i];
      bool variable = false;
      for (const std::string& in : n.inputs) {
        ++uses_[in];
        consumer_[in] = i;
        variable = variable || variable_.count(in) > 0;
      }
      // Shape's output is a constant at load (the loader knows every shape), not bounded.
      variable = variable && n.op_type != "Shape" && n.op_type != "Size";
      for (const std::string& out : n.outputs) {
        if (out.empty()) continue;
        single_definitions_ = defined.insert(out).second && single_definitions_;
        producer_[out] = i;
        if (variable) variable_.insert(out);
      }
      if (n.op_type == "Constant" && in_default_domain(n) && n.outputs.size() == 1) {
        constant_scalar(n);
      }
    }
  }

  /// False when some tensor name is defined twice (an initializer, graph input or node output
  /// again): not a valid ONNX graph, and the matcher's maps would not tell which one is read.
  [[nodiscard]] bool single_definitions() const { return single_definitions_; }
  [[nodiscard]] const OnnxNode& node(size_t i) const { return model_.nodes[i]; }
  [[nodiscard]] bool is_variable(const std::string& name) const {
    return variable_.count(name) > 0;
  }
  [[nodiscard]] bool is_scalar(const std::string& name, double v) const {
    auto it = scalars_.find(name);
    return it != scalars_.end() && std::abs(it->second - v) <= kTolerance * std::abs(v);
  }
  // The node that produces `name`, when it is a single-output node of the default domain.
  [[nodiscard]] std::optional<size_t> producer(const std::string& name) const {
    auto it = producer_.find(name);
    if (it == producer_.end() || !plain(it->second)) return {};
    return it->second;
  }
  // The one node that reads `name`, when `name` has exactly one use (not a graph output) and
  // that node is a single-output node of the default domain.
  [[nodiscard]] std::optional<size_t> only_consumer(const std::string& name) const {
    auto u = uses_.find(name);
    if (u == uses_.end() || u->second != 1) return {};
    const size_t i = consumer_.at(name);
    if (!plain(i)) return {};
    return i;
  }

 private:
  [[nodiscard]] bool plain(size_t i) const {
    return in_default_domain(model_.nodes[i]) && model_.nodes[i].outputs.size() == 1;
  }
  // A Constant node's scalar value: `value` (a tensor) or `value_float`.
  void constant_scalar(const OnnxNode& n) {
    if (n.attributes.size() != 1) return;
    const OnnxAttribute& a = n.attributes.front();
    if (a.name == "value" && a.kind == OnnxAttribute::Kind::kTensor) {
      if (auto v = scalar_of(a.t)) scalars_[n.outputs.front()] = *v;
    } else if (a.name == "value_float" && a.kind == OnnxAttribute::Kind::kFloat) {
      scalars_[n.outputs.front()] = a.f;
    }
  }

  const OnnxModel& model_;
  bool single_definitions_ = true;
  std::map<std::string, double> scalars_;
  std::set<std::string> variable_;  // bounded at load: depends on the variable input
  std::map<std::string, int> uses_;
  std::map<std::string, size_t> consumer_;  // the last node reading each tensor
  std::map<std::string, size_t> producer_;
};

// The input of binary node n other than `name`, when n is `op` with two inputs of which one is
// `name` (once).
std::optional<std::string> other_operand(const OnnxNode& n, const char* op,
                                         const std::string& name) {
  if (n.op_type != op || n.inputs.size() != 2 || n.inputs[0] == n.inputs[1]) return {};
  if (n.inputs[0] == name) return n.inputs[1];
  if (n.inputs[1] == name) return n.inputs[0];
  return {};
}

// One match: the pattern's five nodes (the last is the final Mul) and x.
struct GeluMatch {
  std::array<size_t, 5> nodes{};
  std::string x;
};

// x of d = Div(x, √2) | Mul(x, 1/√2) | Mul(1/√2, x), the producer of Erf's input.
std::optional<std::string> scaled_input(const GraphIndex& g, const OnnxNode& d) {
  if (d.inputs.size() != 2) return {};
  const std::string& a = d.inputs[0];
  const std::string& b = d.inputs[1];
  if (d.op_type == "Div") {
    if (g.is_variable(a) && g.is_scalar(b, std::numbers::sqrt2)) return a;
    return {};
  }
  if (d.op_type != "Mul") return {};
  const double inv = 1 / std::numbers::sqrt2;
  if (g.is_variable(a) && g.is_scalar(b, inv)) return a;
  if (g.is_variable(b) && g.is_scalar(a, inv)) return b;
  return {};
}

// The GELU pattern whose Erf is node `erf`, when it matches exactly (see the header).
std::optional<GeluMatch> match_at(const GraphIndex& g, size_t erf) {
  const OnnxNode& e = g.node(erf);
  if (e.op_type != "Erf" || !in_default_domain(e) || e.inputs.size() != 1 ||
      e.outputs.size() != 1) {
    return {};
  }
  const auto div = g.producer(e.inputs[0]);
  if (!div || !g.only_consumer(e.inputs[0])) return {};
  const auto x = scaled_input(g, g.node(*div));
  if (!x) return {};
  // a = 1 + e
  const auto add = g.only_consumer(e.outputs[0]);
  if (!add) return {};
  const auto one = other_operand(g.node(*add), "Add", e.outputs[0]);
  if (!one || !g.is_scalar(*one, 1.0)) return {};
  const std::string& a = g.node(*add).outputs[0];
  // The Mul reading a, and what it multiplies a by.
  const auto inner = g.only_consumer(a);
  if (!inner) return {};
  const auto factor = other_operand(g.node(*inner), "Mul", a);
  if (!factor) return {};
  const std::string& product = g.node(*inner).outputs[0];
  if (*factor == *x || g.is_scalar(*factor, 0.5)) {
    // (x·a)·0.5 or x·(0.5·a): the final Mul multiplies the product by the other of x and 0.5.
    const auto outer = g.only_consumer(product);
    if (!outer) return {};
    const auto last = other_operand(g.node(*outer), "Mul", product);
    if (!last) return {};
    const bool ok = *factor == *x ? g.is_scalar(*last, 0.5) : *last == *x;
    if (!ok) return {};
    return GeluMatch{{*div, erf, *add, *inner, *outer}, *x};
  }
  // (x·0.5)·a: the factor is Mul(x, 0.5) used only here.
  const auto half = g.producer(*factor);
  if (!half || !g.only_consumer(*factor)) return {};
  const auto h = other_operand(g.node(*half), "Mul", *x);
  if (!h || !g.is_scalar(*h, 0.5)) return {};
  return GeluMatch{{*div, erf, *add, *half, *inner}, *x};
}

}  // namespace

OnnxModel fuse_exported_gelu(OnnxModel model) {
  std::vector<GeluMatch> matches;
  {
    const GraphIndex g(model);
    if (!g.single_definitions()) return model;
    std::set<size_t> claimed;
    for (size_t i = 0; i < model.nodes.size(); ++i) {
      auto m = match_at(g, i);
      if (!m) continue;
      const bool free = std::none_of(m->nodes.begin(), m->nodes.end(),
                                     [&](size_t n) { return claimed.count(n) > 0; });
      if (!free) continue;
      claimed.insert(m->nodes.begin(), m->nodes.end());
      matches.push_back(std::move(*m));
    }
  }
  if (matches.empty()) return model;
  std::set<size_t> removed;
  for (const GeluMatch& m : matches) {
    OnnxNode& last = model.nodes[m.nodes.back()];
    OnnxNode gelu;
    gelu.name = last.name;
    gelu.op_type = "Gelu";
    gelu.inputs = {m.x};
    gelu.outputs = {last.outputs.front()};
    gelu.opset = kGeluOpset;
    last = std::move(gelu);
    removed.insert(m.nodes.begin(), m.nodes.end() - 1);
  }
  std::vector<OnnxNode> kept;
  kept.reserve(model.nodes.size() - removed.size());
  for (size_t i = 0; i < model.nodes.size(); ++i) {
    if (!removed.count(i)) kept.push_back(std::move(model.nodes[i]));
  }
  model.nodes = std::move(kept);
  return model;
}

}  // namespace distcrown::io
