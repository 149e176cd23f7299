#include "distcrown/io/onnx_loader.hpp"

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include <ATen/ATen.h>

#include "distcrown/util/error.hpp"
#include "io/onnx_lowering.hpp"
#include "io/onnx_model.hpp"
#include "onnx_gelu_fusion.hpp"

namespace distcrown::io {
namespace {

std::vector<int64_t> input_shape(const OnnxValueInfo& vi, const std::string& where) {
  if (!vi.is_tensor) throw ModelError(where + " is not a tensor");
  if (vi.elem_type != kOnnxFloat && vi.elem_type != kOnnxDouble) {
    throw UnsupportedError(where + ": unsupported: input element type " +
                           std::to_string(vi.elem_type) + " (expected float)");
  }
  if (!vi.has_shape) throw ModelError(where + " has no shape");
  std::vector<int64_t> shape;
  // A first dimension above 1 is part of the input, not a batch: a batch dim 1 goes before it.
  if (!vi.dims.empty() && vi.dims[0] > 1) shape.push_back(1);
  for (size_t i = 0; i < vi.dims.size(); ++i) {
    if (vi.dims[i] > 0) {
      shape.push_back(vi.dims[i]);
    } else if (i == 0) {
      shape.push_back(1);  // symbolic or unknown batch dimension
    } else {
      throw UnsupportedError(where + ": unsupported: symbolic dimension " + std::to_string(i));
    }
  }
  if (shape.empty()) throw UnsupportedError(where + ": unsupported: scalar input");
  (void)checked_numel(shape, where);
  return shape;
}

// Control characters (and the backslash) in a name, escaped as \xNN (\\): messages that quote
// names stay one line. Injective, so names that differed still differ and wiring is unchanged.
std::string escape_controls(const std::string& s) {
  std::string out;
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\\') {
      out += "\\\\";
    } else if (u < 0x20 || u == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
  return out;
}

// Every name and string of the model escaped (escape_controls).
OnnxModel with_printable_names(OnnxModel m) {
  const auto fix = [](std::string& s) { s = escape_controls(s); };
  for (auto& t : m.initializers) fix(t.name);
  for (auto& v : m.inputs) fix(v.name);
  for (auto& v : m.outputs) fix(v.name);
  for (auto& n : m.nodes) {
    fix(n.name);
    fix(n.op_type);
    fix(n.domain);
    for (auto& s : n.inputs) fix(s);
    for (auto& s : n.outputs) fix(s);
    for (auto& a : n.attributes) {
      fix(a.name);
      fix(a.s);
    }
  }
  return m;
}

// The unsupported nodes of one model, thrown as one UnsupportedError at the end of the scan. One
// node: its own one-line message. Several: a first line that counts them, then one line per node
// ("  node 'name' (Op): why", util/error.hpp kUnsupportedListItem), in graph order.
class UnsupportedNodes {
 public:
  explicit UnsupportedNodes(std::string source) : source_(std::move(source)) {}
  /// `message` is the node's one-line error, "<source>: node 'name' (Op): why".
  void add(const std::string& message) { messages_.push_back(message); }
  /// A node that reads an unavailable value: only its op type could be checked.
  void depends_on_unsupported() { ++unchecked_; }

  void throw_if_any() const {
    if (messages_.empty()) return;
    const bool one = messages_.size() == 1;
    std::string note;
    if (unchecked_ > 0) {
      note = " (" + std::to_string(unchecked_) +
             (unchecked_ == 1 ? " later node that depends on " : " later nodes that depend on ") +
             (one ? "it" : "them") + (unchecked_ == 1 ? " was" : " were") +
             " checked by op type only)";
    }
    if (one) throw UnsupportedError(messages_.front() + note);
    std::string text = source_ + ": unsupported: " + std::to_string(messages_.size()) +
                       " nodes cannot be lowered" + note + ":";
    const std::string prefix = source_ + ": ";
    for (const std::string& m : messages_) {
      const bool prefixed = m.compare(0, prefix.size(), prefix) == 0;
      text += "\n  ";  // kUnsupportedListItem: "  node '..."
      text += prefixed ? m.substr(prefix.size()) : m;
    }
    throw UnsupportedError(text);
  }

 private:
  std::string source_;
  std::vector<std::string> messages_;
  int64_t unchecked_ = 0;
};

// The graph output's Softmax node when the loader may leave it out (OnnxLoadOptions): over the
// last axis of a bounded, batched [1, m] input; null otherwise.
const OnnxNode* peelable_softmax(const OnnxModel& model, const std::map<std::string, Value>& values,
                                 const GraphBuilder& builder) {
  const std::string& out = model.outputs.front().name;
  for (const OnnxNode& node : model.nodes) {
    if (node.outputs.empty() || node.outputs.front() != out) continue;
    if (node.op_type != "Softmax" || node.inputs.size() != 1) return nullptr;
    auto in = values.find(node.inputs.front());
    if (in == values.end() || !in->second.is_bounded() || in->second.unbatched) return nullptr;
    if (builder.shape(in->second.node).size() != 2) return nullptr;
    for (const auto& a : node.attributes) {
      if (a.name == "axis" && a.i != 1 && a.i != -1) return nullptr;
    }
    return &node;
  }
  return nullptr;
}

LoadedOnnx build(const OnnxModel& parsed, const std::string& source,
                 const OnnxLoadOptions& options) {
  // GELU exported as Div, Erf, Add, Mul, Mul becomes one Gelu node (onnx_gelu_fusion.hpp).
  const OnnxModel model = fuse_exported_gelu(with_printable_names(parsed));
  std::map<std::string, Value> values = initializer_values(model, source);
  const OnnxValueInfo* input = &variable_input(model, values, source);
  // A float64 model stays float64 (its parameters are not rounded at import).
  const at::ScalarType dtype = input->elem_type == kOnnxDouble ? at::kDouble : at::kFloat;
  GraphBuilder builder(input_shape(*input, source + ": input '" + input->name + "'"), input->name,
                       dtype);
  values[input->name] = input->dims.empty() || input->dims[0] <= 1
                            ? Value::of_node(builder.input())
                            : Value::of_unbatched_node(builder.input());

  // Unsupported nodes are collected, not thrown one by one, so that one load names them all. The
  // outputs of such a node are "unavailable": a later node reading one cannot be lowered (its
  // lowering needs the missing value), so it is checked by its op type only and its outputs are
  // unavailable too. Every other error (a malformed model) is thrown at once.
  UnsupportedNodes unsupported(source);
  std::set<std::string> unavailable;
  NodeLowerer lowerer(source, dtype, builder, values);
  bool peeled = false;
  for (const auto& node : model.nodes) {
    const auto skip = [&] {
      for (const auto& name : node.outputs) {
        if (!name.empty()) unavailable.insert(name);
      }
    };
    if (options.peel_output_softmax && !node.outputs.empty() &&
        node.outputs.front() == model.outputs.front().name &&
        peelable_softmax(model, values, builder) == &node) {
      values[node.outputs.front()] = values.at(node.inputs.front());  // the logits
      peeled = true;
      continue;
    }
    const LowerFn* lower = nullptr;
    try {
      lower = &find_lowering(node, model.opset, source);
    } catch (const UnsupportedError& e) {
      unsupported.add(e.what());
      skip();
      continue;
    }
    if (std::any_of(node.inputs.begin(), node.inputs.end(),
                    [&](const std::string& name) { return unavailable.count(name) > 0; })) {
      unsupported.depends_on_unsupported();
      skip();
      continue;
    }
    try {
      lowerer.lower(node, *lower);
    } catch (const UnsupportedError& e) {
      unsupported.add(e.what());
      skip();
    }
  }
  unsupported.throw_if_any();
  const std::string& out_name = model.outputs.front().name;
  auto it = values.find(out_name);
  if (it == values.end())
    throw ModelError(source + ": output '" + out_name + "' is never produced");
  if (!it->second.is_bounded()) {
    throw ModelError(source + ": output '" + out_name + "' does not depend on the input");
  }
  return {std::move(builder).finish(it->second.node), peeled};
}

}  // namespace

BoundGraph load_onnx_bytes(const std::string& bytes, const std::string& source) {
  return build(parse_onnx_model(bytes, source), source, {}).graph;
}

LoadedOnnx load_onnx_bytes(const std::string& bytes, const std::string& source,
                           const OnnxLoadOptions& options) {
  return build(parse_onnx_model(bytes, source), source, options);
}

BoundGraph load_onnx(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ModelError(path + ": cannot open model file");
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) throw ModelError(path + ": read error");
  return load_onnx_bytes(buf.str(), path);
}

}  // namespace distcrown::io
