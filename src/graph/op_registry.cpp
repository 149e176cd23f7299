#include "distcrown/graph/op_registry.hpp"

#include "distcrown/ops/register.hpp"
#include "distcrown/util/error.hpp"

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
  return inputs[i].node;
}

bool LoweringContext::all_constant() const {
  for (const auto& v : inputs) {
    if (v.is_bounded()) return false;
  }
  return true;
}

Value LoweringContext::emit(NodePtr op, std::vector<int> from, const std::string& suffix) {
  try {
    return Value::of_node(builder.add(name + suffix, std::move(op), std::move(from)));
  } catch (const ModelError& e) {
    // GraphBuilder names the node but not the file.
    throw ModelError(source + ": " + e.what());
  }
}

void OpRegistry::add(const std::string& op_type, LowerFn fn) { table_[op_type] = std::move(fn); }

const LowerFn* OpRegistry::find(const std::string& op_type) const {
  auto it = table_.find(op_type);
  return it == table_.end() ? nullptr : &it->second;
}

std::vector<std::string> OpRegistry::op_types() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : table_) out.push_back(k);
  return out;
}

const OpRegistry& builtin_ops() {
  static const OpRegistry registry = [] {
    OpRegistry r;
    ops::register_all(r);
    return r;
  }();
  return registry;
}

}  // namespace distcrown
