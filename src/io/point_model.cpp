#include "distcrown/io/point_model.hpp"

#include <algorithm>
#include <map>
#include <set>

#include <ATen/ATen.h>

#include "distcrown/util/error.hpp"
#include "io/onnx_lowering.hpp"
#include "io/onnx_model.hpp"
#include "onnx_gelu_fusion.hpp"

namespace distcrown::io {

struct PointModel::Parsed {
  std::string source;
  OnnxModel model;
  std::map<std::string, Value> initializers;  // as stored in the model
  // The initializers with every floating one in float32 / float64: made once, not per point.
  std::map<std::string, Value> initializers_f32, initializers_f64;
  std::vector<InputRead> reads;  // input_reads(), found once at construction

  // Folds the model's selections of a tensor of input element indices (input_reads()).
  [[nodiscard]] std::vector<InputRead> trace_input_reads() const;
  std::string input_name;
  std::vector<int64_t> input_dims;  // as in the model, a symbolic first dim taken as 1
  int64_t input_numel = 0;
};

namespace {

// Ops that only select, repeat or rearrange the elements of their data input (input 0; every
// input for Concat): folded on a tensor of element indices, they give the indices they read.
bool selects_elements(const std::string& op_type) {
  static const std::set<std::string> kSelections{"Gather",  "Slice",     "Reshape",  "Flatten",
                                                 "Squeeze", "Unsqueeze", "Identity", "Transpose",
                                                 "Split",   "Expand",    "Concat",   "Dropout"};
  return kSelections.count(op_type) > 0;
}

// ONNX Cast to a signed integer type (int8, int16, int32, int64): truncation toward zero.
bool casts_to_signed_integer(const OnnxNode& node) {
  if (node.op_type != "Cast") return false;
  for (const auto& a : node.attributes) {
    if (a.name == "to") return a.i == 3 || a.i == 5 || a.i == 6 || a.i == 7;
  }
  return false;
}

// 0, 1, ..., the node's input count − 1: Concat's data inputs.
std::vector<size_t> every_input(const OnnxNode& node) {
  std::vector<size_t> all(node.inputs.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  return all;
}

std::vector<int64_t> dims_of(const OnnxValueInfo& vi, const std::string& where) {
  if (!vi.is_tensor || !vi.has_shape) throw ModelError(where + " has no tensor shape");
  std::vector<int64_t> dims;
  for (size_t i = 0; i < vi.dims.size(); ++i) {
    if (vi.dims[i] <= 0 && i > 0) {
      throw UnsupportedError(where + ": unsupported: symbolic dimension " + std::to_string(i));
    }
    dims.push_back(std::max<int64_t>(vi.dims[i], 1));
  }
  return dims;
}

// `values` with every floating constant in `dtype`.
std::map<std::string, Value> with_floats_in(std::map<std::string, Value> values,
                                            at::ScalarType dtype) {
  for (auto& [name, v] : values) {
    if (v.is_constant() && v.constant.is_floating_point()) v.constant = v.constant.to(dtype);
  }
  return values;
}

}  // namespace

PointModel::PointModel(const std::string& bytes, std::string source)
    : parsed_(std::make_unique<Parsed>()) {
  Parsed& p = *parsed_;
  p.source = std::move(source);
  p.model = fuse_exported_gelu(parse_onnx_model(bytes, p.source));
  p.initializers = initializer_values(p.model, p.source);
  const OnnxValueInfo& input = variable_input(p.model, p.initializers, p.source);
  p.input_name = input.name;
  p.input_dims = dims_of(input, p.source + ": input '" + input.name + "'");
  p.input_numel = checked_numel(p.input_dims, p.source);
  p.initializers_f32 = with_floats_in(p.initializers, at::kFloat);
  p.initializers_f64 = with_floats_in(p.initializers, at::kDouble);
  p.reads = p.trace_input_reads();
}

PointModel::~PointModel() = default;
PointModel::PointModel(PointModel&&) noexcept = default;
PointModel& PointModel::operator=(PointModel&&) noexcept = default;

int64_t PointModel::input_numel() const { return parsed_->input_numel; }

at::Tensor PointModel::evaluate(const at::Tensor& x, at::ScalarType dtype) const {
  const Parsed& p = *parsed_;
  if (x.numel() != p.input_numel) {
    throw InvalidArgument(p.source + ": " + std::to_string(x.numel()) +
                          " input values, the model takes " + std::to_string(p.input_numel));
  }
  if (dtype != at::kFloat && dtype != at::kDouble) {
    throw InvalidArgument("PointModel::evaluate: float32 or float64 only");
  }
  std::map<std::string, Value> values =
      dtype == at::kFloat ? p.initializers_f32 : p.initializers_f64;
  values[p.input_name] = Value::of_constant(x.reshape(p.input_dims).to(dtype));
  GraphBuilder unused({1, p.input_numel}, p.input_name, dtype);  // no node is bounded
  NodeLowerer lowerer(p.source, dtype, unused, values);
  for (const auto& node : p.model.nodes) {
    lowerer.lower(node, find_lowering(node, p.model.opset, p.source));
    // A Constant node's tensor in the evaluation's dtype too (a float32 weight meeting a
    // float64 input would stop Conv and MatMul).
    if (node.op_type == "Constant" && !node.outputs.empty()) {
      Value& v = values[node.outputs.front()];
      if (v.is_constant() && v.constant.is_floating_point()) v.constant = v.constant.to(dtype);
    }
  }
  const Value& out = values.at(p.model.outputs.front().name);
  if (!out.is_constant()) throw ModelError(p.source + ": the output was not folded to a value");
  return out.constant.to(dtype).flatten();
}

const std::vector<InputRead>& PointModel::input_reads() const { return parsed_->reads; }

std::vector<InputRead> PointModel::Parsed::trace_input_reads() const {
  std::vector<InputRead> found(size_t(input_numel), InputRead::kUnread);
  const auto mark = [&](const at::Tensor& indices, InputRead how) {
    const at::Tensor flat = indices.flatten().contiguous();
    const int64_t* e = flat.data_ptr<int64_t>();
    for (int64_t i = 0; i < flat.numel(); ++i) {
      InputRead& r = found[size_t(e[i])];
      r = std::max(r, how);
    }
  };
  std::map<std::string, Value> values = initializers;
  values[input_name] = Value::of_constant(at::arange(input_numel, at::kLong).reshape(input_dims));
  std::set<std::string> traced{input_name};  // values that hold input element indices
  std::set<std::string> unavailable;
  GraphBuilder unused({1, input_numel}, input_name, at::kFloat);
  NodeLowerer lowerer(source, at::kFloat, unused, values);
  for (const auto& node : model.nodes) {
    std::vector<size_t> traced_at;
    bool reads_unavailable = false;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (traced.count(node.inputs[i])) traced_at.push_back(i);
      if (unavailable.count(node.inputs[i])) reads_unavailable = true;
    }
    const auto read_as = [&](InputRead how) {
      for (const size_t i : traced_at) mark(values.at(node.inputs[i]).constant, how);
    };
    bool folded = false;
    if (casts_to_signed_integer(node) && !traced_at.empty()) {
      read_as(InputRead::kAsInteger);
    } else if (!reads_unavailable &&
               (traced_at.empty() || node.op_type == "Shape" ||
                (selects_elements(node.op_type) &&
                 traced_at ==
                     (node.op_type == "Concat" ? every_input(node) : std::vector<size_t>{0})))) {
      try {
        lowerer.lower(node, find_lowering(node, model.opset, source));
        folded = true;
      } catch (const std::exception&) {
        read_as(InputRead::kAsValue);
      }
      if (folded && node.op_type != "Shape" && !traced_at.empty()) {
        for (const auto& name : node.outputs) traced.insert(name);
      }
    } else {
      read_as(InputRead::kAsValue);
    }
    if (!folded) unavailable.insert(node.outputs.begin(), node.outputs.end());
  }
  const std::string& out = model.outputs.front().name;
  if (traced.count(out)) mark(values.at(out).constant, InputRead::kAsValue);
  return found;
}

}  // namespace distcrown::io
