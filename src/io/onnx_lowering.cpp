#include "io/onnx_lowering.hpp"

#include <algorithm>
#include <cstring>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "distcrown/util/error.hpp"
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

// A node input that no earlier node produced: unsupported when it is an output that the loader
// does not produce (`not_produced`), else a malformed model.
[[noreturn]] void refuse_missing_input(const std::string& name, const std::string& where,
                                       const std::map<std::string, std::string>& not_produced) {
  auto np = not_produced.find(name);
  if (np != not_produced.end()) throw UnsupportedError(where + ": unsupported: " + np->second);
  throw ModelError(where + ": input '" + name + "' is not produced by any earlier node");
}

}  // namespace

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

std::string node_label(const OnnxNode& node) {
  if (!node.name.empty()) return node.name;
  return node.outputs.empty() ? std::string("<unnamed>") : node.outputs.front();
}

std::string node_where(const std::string& source, const OnnxNode& node) {
  return source + ": node '" + node_label(node) + "' (" + node.op_type + ")";
}

const LowerFn& find_lowering(const OnnxNode& node, int64_t opset, const std::string& source) {
  const std::string where = node_where(source, node);
  if (!node.domain.empty() && node.domain != "ai.onnx") {
    throw UnsupportedError(where + ": unsupported: operator domain '" + node.domain + "'");
  }
  const int64_t at = node.opset > 0 ? node.opset : opset;
  const OpRegistry& registry = ops::builtin_ops();
  const LowerFn* lower = registry.find(node.op_type, at);
  if (!lower) throw UnsupportedError(where + ": " + registry.describe_missing(node.op_type, at));
  return *lower;
}

void NodeLowerer::lower(const OnnxNode& node, const LowerFn& lower) {
  const std::string label = node_label(node);
  const std::string where = node_where(source_, node);
  if (node.outputs.empty()) throw ModelError(where + ": has no output");
  const AttributeMap attrs = to_attributes(node, where);
  LoweringContext ctx{label,  node.op_type,        source_, where, attrs, {}, builder_,
                      dtype_, node.outputs.size(), {}};
  for (const auto& name : node.inputs) {
    if (name.empty()) {
      ctx.inputs.push_back(Value{});  // an omitted optional input
      continue;
    }
    auto it = values_.find(name);
    if (it == values_.end()) refuse_missing_input(name, where, not_produced_);
    ctx.inputs.push_back(it->second);
  }
  Value out;
  try {
    out = lower(ctx);
  } catch (const c10::Error& e) {
    throw ModelError(where + ": " + e.what_without_backtrace());
  }
  const bool reads_unbatched =
      std::any_of(ctx.inputs.begin(), ctx.inputs.end(), [](const Value& v) { return v.unbatched; });
  if (reads_unbatched && !ctx.unbatched_accepted) ctx.unsupported_unbatched();
  values_[node.outputs.front()] = out;
  // Outputs after the first (Split's); one the lowering does not produce (MaxPool's Indices,
  // Dropout's mask) stays unproduced, and a node reading it is refused naming this node.
  for (size_t i = 1; i < node.outputs.size(); ++i) {
    const std::string& name = node.outputs[i];
    if (name.empty() || name == node.outputs.front()) continue;
    if (i - 1 < ctx.extra_outputs.size()) {
      values_[name] = ctx.extra_outputs[i - 1];
      continue;
    }
    values_.erase(name);
    not_produced_[name] = "output " + std::to_string(i) + " ('" + name + "') of node '" + label +
                          "' (" + node.op_type + ")";
  }
}

std::map<std::string, Value> initializer_values(const OnnxModel& model, const std::string& source) {
  std::map<std::string, Value> values;
  for (const auto& init : model.initializers) {
    values[init.name] =
        Value::of_constant(to_tensor(init, source + ": initializer '" + init.name + "'"));
  }
  return values;
}

const OnnxValueInfo& variable_input(const OnnxModel& model,
                                    const std::map<std::string, Value>& values,
                                    const std::string& source) {
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
  return *input;
}

}  // namespace distcrown::io
