#include "graph/op_registry.hpp"

#include <ATen/ATen.h>

#include "distcrown/util/error.hpp"
#include "util/tensor_values.hpp"

namespace distcrown {

bool AttributeMap::has(const std::string& key) const {
  return ints.count(key) || int_lists.count(key) || floats.count(key) || strings.count(key) ||
         tensors.count(key);
}
int64_t AttributeMap::get_int(const std::string& key, int64_t fallback) const {
  auto it = ints.find(key);
  return it == ints.end() ? fallback : it->second;
}
std::vector<int64_t> AttributeMap::get_ints(const std::string& key,
                                            const std::vector<int64_t>& fallback) const {
  auto it = int_lists.find(key);
  return it == int_lists.end() ? fallback : it->second;
}
double AttributeMap::get_float(const std::string& key, double fallback) const {
  auto it = floats.find(key);
  return it == floats.end() ? fallback : it->second;
}
std::string AttributeMap::get_string(const std::string& key, const std::string& fallback) const {
  auto it = strings.find(key);
  return it == strings.end() ? fallback : it->second;
}

void LoweringContext::fail(const std::string& what) const { throw ModelError(where + ": " + what); }
void LoweringContext::unsupported(const std::string& what) const {
  throw UnsupportedError(where + ": unsupported: " + what);
}

const at::Tensor& LoweringContext::constant(size_t i) const {
  if (i >= inputs.size() || inputs[i].is_absent()) fail("missing input " + std::to_string(i));
  if (!inputs[i].is_constant()) {
    unsupported("input " + std::to_string(i) +
                " depends on the perturbed input; only a constant is supported there");
  }
  return inputs[i].constant;
}

int LoweringContext::bounded(size_t i) const {
  if (i >= inputs.size() || inputs[i].is_absent()) fail("missing input " + std::to_string(i));
  if (!inputs[i].is_bounded()) fail("input " + std::to_string(i) + " is expected to be variable");
  if (inputs[i].unbatched) unsupported_unbatched();
  return inputs[i].node;
}

int LoweringContext::bounded_unbatched(size_t i) {
  unbatched_accepted = true;
  if (i >= inputs.size() || inputs[i].is_absent()) fail("missing input " + std::to_string(i));
  if (!inputs[i].is_bounded()) fail("input " + std::to_string(i) + " is expected to be variable");
  return inputs[i].node;
}

void LoweringContext::unsupported_unbatched() const {
  unsupported(op_type +
              " of a tensor without a batch dimension (a model input whose first dimension is "
              "not a batch, or a Transpose that moved the batch dimension); Reshape, Flatten, "
              "Transpose, MatMul by a constant and Shape read one");
}

bool LoweringContext::all_constant() const {
  for (const auto& v : inputs) {
    if (v.is_bounded()) return false;
  }
  return true;
}

ParamPtr LoweringContext::param(const at::Tensor& value) const {
  at::Tensor p = value.to(param_dtype);
  // A NaN or infinite weight makes every bound through it NaN: refuse the model here, naming the
  // node, rather than print NaN bounds later (a verifier must not answer from them).
  if (p.is_floating_point() && !at::isfinite(p).all().item<bool>()) {
    fail("a parameter holds NaN or infinite values" +
         std::string(value.scalar_type() != param_dtype ? " in " + dtype_name(param_dtype) : ""));
  }
  return make_param(p);
}

Value LoweringContext::emit(NodePtr op, std::vector<int> from, const std::string& suffix) {
  try {
    return Value::of_node(builder.add(name + suffix, std::move(op), std::move(from)));
  } catch (const ModelError& e) {
    // GraphBuilder names the node but not the file.
    throw ModelError(source + ": " + e.what());
  }
}

std::string OpsetRange::str() const { return std::to_string(first) + "-" + std::to_string(last); }

void OpRegistry::add(const std::string& op_type, OpsetRange opsets, LowerFn fn) {
  if (opsets.first < 1 || opsets.last < opsets.first) {
    throw InvalidArgument("operator " + op_type + ": empty opset range " + opsets.str());
  }
  std::vector<Entry>& entries = table_[op_type];
  for (const Entry& e : entries) {
    if (e.opsets.overlaps(opsets)) {
      throw InvalidArgument("operator " + op_type + " registered twice (opsets " + e.opsets.str() +
                            " and " + opsets.str() + ")");
    }
  }
  entries.push_back({opsets, std::move(fn)});
}

const LowerFn* OpRegistry::find(const std::string& op_type, int64_t opset) const {
  auto it = table_.find(op_type);
  if (it == table_.end()) return nullptr;
  for (const Entry& e : it->second) {
    if (e.opsets.contains(opset)) return &e.lower;
  }
  return nullptr;
}

std::string OpRegistry::describe_missing(const std::string& op_type, int64_t opset) const {
  auto it = table_.find(op_type);
  if (it == table_.end()) return "unsupported operator " + op_type;
  std::string ranges;
  for (const Entry& e : it->second) ranges += (ranges.empty() ? "" : ", ") + e.opsets.str();
  return "unsupported: " + op_type + " is supported for opsets " + ranges +
         ", the model uses opset " + std::to_string(opset);
}

std::vector<std::string> OpRegistry::op_types() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : table_) out.push_back(k);
  return out;
}

}  // namespace distcrown
