#include "distcrown/io/onnx_loader.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "distcrown/util/error.hpp"
#include "io/onnx_model.hpp"
#include "onnx_gelu_fusion.hpp"
#include "ops/builtin_ops.hpp"

namespace distcrown::io {
namespace {

// The most elements one tensor of a model (an initializer, a constant, the input) may have:
// 2^31, 8 GiB in float32. Larger ones are refused at load rather than allocated.
constexpr int64_t kMaxTensorElements = int64_t{1} << 31;

std::string dims_string(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

// Product of `dims`, refusing negative dimensions and products that overflow or pass the limit.
int64_t checked_numel(const std::vector<int64_t>& dims, const std::string& where) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) throw ModelError(where + ": negative dimension " + std::to_string(d));
    if (d != 0 && n > kMaxTensorElements / d) {
      throw UnsupportedError(where + ": unsupported: more than 2^31 elements (dimensions " +
                             dims_string(dims) + ")");
    }
    n *= d;
  }
  return n;
}

at::Tensor to_tensor(const OnnxTensor& t, const std::string& where) {
  if (t.external) throw UnsupportedError(where + ": unsupported: tensor stored in external data");
  at::ScalarType type{};
  size_t width = 0;
  switch (t.data_type) {
    case kOnnxFloat:
      type = at::kFloat, width = 4;
      break;
    case kOnnxDouble:
      type = at::kDouble, width = 8;
      break;
    case kOnnxInt64:
      type = at::kLong, width = 8;
      break;
    case kOnnxInt32:
      type = at::kInt, width = 4;
      break;
    default:
      throw UnsupportedError(where + ": unsupported: tensor data type " +
                             std::to_string(t.data_type));
  }
  const int64_t n = checked_numel(t.dims, where);
  if (t.bytes.size() != size_t(n) * width) {
    throw ModelError(where + ": holds " + std::to_string(t.bytes.size() / width) +
                     " values, its shape needs " + std::to_string(n));
  }
  at::Tensor out = at::empty(t.dims, type);
  if (n > 0) std::memcpy(out.data_ptr(), t.bytes.data(), t.bytes.size());
  return out;
}

AttributeMap to_attributes(const OnnxNode& node, const std::string& where) {
  AttributeMap m;
  for (const auto& a : node.attributes) {
    switch (a.kind) {
      case OnnxAttribute::Kind::kInt:
        m.ints[a.name] = a.i;
        break;
      case OnnxAttribute::Kind::kInts:
        m.int_lists[a.name] = a.ints;
        break;
      case OnnxAttribute::Kind::kFloat:
        m.floats[a.name] = a.f;
        break;
      case OnnxAttribute::Kind::kString:
        m.strings[a.name] = a.s;
        break;
      case OnnxAttribute::Kind::kTensor:
        m.tensors[a.name] = to_tensor(a.t, where + " attribute '" + a.name + "'");
        break;
      case OnnxAttribute::Kind::kOther:
        break;  // an operator that needs another kind reports the missing attribute itself
    }
  }
  return m;
}

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

std::string node_label(const OnnxNode& node) {
  if (!node.name.empty()) return node.name;
  return node.outputs.empty() ? std::string("<unnamed>") : node.outputs.front();
}

// A node input that no earlier node produced: unsupported when it is an output that the loader
// does not produce (`not_produced`), else a malformed model.
[[noreturn]] void refuse_missing_input(const std::string& name, const std::string& where,
                                       const std::map<std::string, std::string>& not_produced) {
  auto np = not_produced.find(name);
  if (np != not_produced.end()) throw UnsupportedError(where + ": unsupported: " + np->second);
  throw ModelError(where + ": input '" + name + "' is not produced by any earlier node");
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

BoundGraph build(const OnnxModel& parsed, const std::string& source) {
  // GELU exported as Div, Erf, Add, Mul, Mul becomes one Gelu node (onnx_gelu_fusion.hpp).
  const OnnxModel model = fuse_exported_gelu(with_printable_names(parsed));
  std::map<std::string, Value> values;
  for (const auto& init : model.initializers) {
    values[init.name] =
        Value::of_constant(to_tensor(init, source + ": initializer '" + init.name + "'"));
  }
  // The variable input: the one graph input that is not an initializer.
  const OnnxValueInfo* input = nullptr;
  for (const auto& vi : model.inputs) {
    if (values.count(vi.name)) continue;
    if (input) {
      throw UnsupportedError(source + ": unsupported: more than one variable input ('" +
                             input->name + "', '" + vi.name + "')");
    }
    input = &vi;
  }
  if (!input) throw ModelError(source + ": the graph has no input");
  if (model.outputs.size() != 1) {
    throw UnsupportedError(source + ": unsupported: " + std::to_string(model.outputs.size()) +
                           " graph outputs (expected 1)");
  }
  // A float64 model stays float64 (its parameters are not rounded at import).
  const at::ScalarType dtype = input->elem_type == kOnnxDouble ? at::kDouble : at::kFloat;
  GraphBuilder builder(input_shape(*input, source + ": input '" + input->name + "'"), input->name,
                       dtype);
  values[input->name] = input->dims.empty() || input->dims[0] <= 1
                            ? Value::of_node(builder.input())
                            : Value::of_unbatched_node(builder.input());

  const OpRegistry& registry = ops::builtin_ops();
  // Unsupported nodes are collected, not thrown one by one, so that one load names them all. The
  // outputs of such a node are "unavailable": a later node reading one cannot be lowered (its
  // lowering needs the missing value), so it is checked by its op type only and its outputs are
  // unavailable too. Every other error (a malformed model) is thrown at once.
  UnsupportedNodes unsupported(source);
  std::set<std::string> unavailable;
  // Outputs after the first that no lowering produces (MaxPool's Indices, Dropout's mask): a use
  // of one is refused, naming the node that would have produced it.
  std::map<std::string, std::string> not_produced;  // value name -> which output of which node
  for (const auto& node : model.nodes) {
    const std::string label = node_label(node);
    const std::string where = source + ": node '" + label + "' (" + node.op_type + ")";
    const auto skip = [&] {
      for (const auto& name : node.outputs) {
        if (!name.empty()) unavailable.insert(name);
      }
    };
    if (!node.domain.empty() && node.domain != "ai.onnx") {
      unsupported.add(where + ": unsupported: operator domain '" + node.domain + "'");
      skip();
      continue;
    }
    const int64_t opset = node.opset > 0 ? node.opset : model.opset;
    const LowerFn* lower = registry.find(node.op_type, opset);
    if (!lower) {
      unsupported.add(where + ": " + registry.describe_missing(node.op_type, opset));
      skip();
      continue;
    }
    if (std::any_of(node.inputs.begin(), node.inputs.end(),
                    [&](const std::string& name) { return unavailable.count(name) > 0; })) {
      unsupported.depends_on_unsupported();
      skip();
      continue;
    }
    if (node.outputs.empty()) throw ModelError(where + ": has no output");
    try {
      const AttributeMap attrs = to_attributes(node, where);
      LoweringContext ctx{label, node.op_type,        source, where, attrs, {}, builder,
                          dtype, node.outputs.size(), {}};
      for (const auto& name : node.inputs) {
        if (name.empty()) {
          ctx.inputs.push_back(Value{});  // an omitted optional input
          continue;
        }
        auto it = values.find(name);
        if (it == values.end()) refuse_missing_input(name, where, not_produced);
        ctx.inputs.push_back(it->second);
      }
      Value out;
      try {
        out = (*lower)(ctx);
      } catch (const c10::Error& e) {
        throw ModelError(where + ": " + e.what_without_backtrace());
      }
      const bool reads_unbatched = std::any_of(ctx.inputs.begin(), ctx.inputs.end(),
                                               [](const Value& v) { return v.unbatched; });
      if (reads_unbatched && !ctx.unbatched_accepted) ctx.unsupported_unbatched();
      values[node.outputs.front()] = out;
      // Outputs after the first (Split's); one the lowering does not produce (MaxPool's Indices,
      // Dropout's mask) stays unproduced, and a node reading it is refused naming this node.
      for (size_t i = 1; i < node.outputs.size(); ++i) {
        const std::string& name = node.outputs[i];
        if (name.empty() || name == node.outputs.front()) continue;
        if (i - 1 < ctx.extra_outputs.size()) {
          values[name] = ctx.extra_outputs[i - 1];
          continue;
        }
        values.erase(name);
        not_produced[name] = "output " + std::to_string(i) + " ('" + name + "') of node '" + label +
                             "' (" + node.op_type + ")";
      }
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
  return std::move(builder).finish(it->second.node);
}

}  // namespace

BoundGraph load_onnx_bytes(const std::string& bytes, const std::string& source) {
  return build(parse_onnx_model(bytes, source), source);
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
