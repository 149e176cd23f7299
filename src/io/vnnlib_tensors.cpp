#include "io/vnnlib_tensors.hpp"

#include <array>
#include <cctype>
#include <limits>

namespace distcrown::io::detail {
namespace {

constexpr int64_t kMaxElements = int64_t(1) << 40;

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())) != 0) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())) != 0) s.remove_suffix(1);
  return s;
}

// "1, 3, 32" (inside brackets) as non-negative integers; "" for none.
std::string parse_numbers(std::string_view list, std::vector<int64_t>* out) {
  out->clear();
  if (trim(list).empty()) return "";
  while (true) {
    const size_t comma = list.find(',');
    const std::string_view item = trim(list.substr(0, comma));
    if (item.empty() || item.size() > 12) return "expected a whole number before ',' or ']'";
    int64_t v = 0;
    for (const char c : item) {
      if (c < '0' || c > '9') {
        std::string msg(item);
        msg.append(" is not a whole number");
        return msg;
      }
      v = v * 10 + (c - '0');
    }
    out->push_back(v);
    if (comma == std::string_view::npos) return "";
    list.remove_prefix(comma + 1);
  }
}

}  // namespace

int64_t TensorVariable::numel() const {
  int64_t n = 1;
  for (const int64_t d : shape) n *= d;
  return n;
}

std::string parse_shape(std::string_view text, std::vector<int64_t>* shape) {
  if (text.size() < 2 || text.front() != '[' || text.back() != ']') {
    return "expected a shape such as [5] or [1, 3, 32, 32]";
  }
  if (std::string e = parse_numbers(text.substr(1, text.size() - 2), shape); !e.empty()) return e;
  int64_t n = 1;
  for (const int64_t d : *shape) {
    if (d == 0) return "a dimension of 0 declares no element";
    if (n > kMaxElements / d) return "too many elements";
    n *= d;
  }
  return "";
}

std::string split_indexed(std::string_view text, std::string* name, std::vector<int64_t>* indices) {
  indices->clear();
  const size_t open = text.find('[');
  *name = std::string(text.substr(0, open));
  if (open == std::string_view::npos) return "";
  if (text.back() != ']' || text.find(']') != text.size() - 1) {
    return "expected an element such as " + *name + "[0] or " + *name + "[0, 3]";
  }
  if (std::string e = parse_numbers(text.substr(open + 1, text.size() - open - 2), indices);
      !e.empty()) {
    return e;
  }
  if (indices->empty()) return "empty index [] (a scalar is named without brackets)";
  return "";
}

bool is_variable_name(std::string_view s) {
  if (s.empty() || std::isalpha(static_cast<unsigned char>(s[0])) == 0) return false;
  for (const char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '_') return false;
  }
  return true;
}

bool is_real_type(std::string_view s) {
  constexpr std::array kReal{"Real",    "real",    "float",  "float16",
                             "float32", "float64", "double", "bfloat16"};
  for (const char* r : kReal) {
    if (s == r) return true;
  }
  return false;
}

int64_t TensorDeclarations::declare(const std::string& name, bool is_output,
                                    std::vector<int64_t> shape) {
  TensorVariable v{name, is_output, next_[is_output ? 1 : 0], std::move(shape)};
  next_[is_output ? 1 : 0] += v.numel();
  const int64_t offset = v.offset;
  by_name_.emplace(name, std::move(v));
  return offset;
}

const TensorVariable* TensorDeclarations::find(const std::string& name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &it->second;
}

std::optional<int64_t> TensorDeclarations::flat(const TensorVariable& v,
                                                const std::vector<int64_t>& indices,
                                                std::string* error) const {
  if (indices.size() != v.shape.size()) {
    *error = v.name + " has " + std::to_string(v.shape.size()) + " dimensions, indexed by " +
             std::to_string(indices.size());
    return std::nullopt;
  }
  int64_t flat = 0;
  for (size_t d = 0; d < indices.size(); ++d) {
    if (indices[d] >= v.shape[d]) {
      *error = "index " + std::to_string(indices[d]) + " out of range for dimension " +
               std::to_string(d) + " of " + v.name + " (size " + std::to_string(v.shape[d]) + ")";
      return std::nullopt;
    }
    flat = flat * v.shape[d] + indices[d];
  }
  return v.offset + flat;
}

std::string element_string(const std::string& name, const std::vector<int64_t>& shape,
                           int64_t flat) {
  if (shape.empty()) return name;
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  std::string s = name + "[";
  for (size_t d = 0; d < idx.size(); ++d) {
    if (d > 0) s += ",";
    s += std::to_string(idx[d]);
  }
  return s + "]";
}

std::string TensorDeclarations::name_of(bool is_output, int64_t index) const {
  for (const auto& [name, v] : by_name_) {
    if (v.is_output != is_output || index < v.offset || index >= v.offset + v.numel()) continue;
    return element_string(name, v.shape, index - v.offset);
  }
  return std::string(is_output ? "Y_" : "X_") + std::to_string(index);
}

}  // namespace distcrown::io::detail
