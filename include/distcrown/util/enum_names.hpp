#pragma once
// Enum <-> name conversion from one table per enum. Each enum declares, next to itself, a
// constexpr function `enum_table(E)` (found by argument-dependent lookup) returning
// std::array<std::pair<E, std::string_view>, N>; the first entry of a value is its canonical name,
// later entries of the same value are accepted aliases. parse_enum, enum_name and enum_names (the
// CLI's allowed values) all read that one table, so a name is written once.
#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "distcrown/util/error.hpp"

namespace distcrown {

/// The canonical names of E, in table order (aliases left out).
template <class E>
std::vector<std::string_view> enum_names() {
  std::vector<std::string_view> out;
  std::vector<E> seen;
  for (const auto& [value, name] : enum_table(E{})) {
    bool repeated = false;
    for (E s : seen) repeated = repeated || s == value;
    if (repeated) continue;
    seen.push_back(value);
    out.push_back(name);
  }
  return out;
}

/// "a, b or c": the canonical names for messages.
template <class E>
std::string enum_names_text() {
  const std::vector<std::string_view> names = enum_names<E>();
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " or " : ", ";
    out += names[i];
  }
  return out;
}

/// The canonical name of `value`.
template <class E>
std::string_view enum_name(E value) {
  for (const auto& [v, name] : enum_table(E{})) {
    if (v == value) return name;
  }
  throw InvalidArgument("enum value without a name");
}

/// The value named `name` (canonical or alias); otherwise InvalidArgument
/// "unknown <what> '<name>' (expected a, b or c)".
template <class E>
E parse_enum(std::string_view name, std::string_view what) {
  for (const auto& [value, n] : enum_table(E{})) {
    if (n == name) return value;
  }
  throw InvalidArgument("unknown " + std::string(what) + " '" + std::string(name) + "' (expected " +
                        enum_names_text<E>() + ")");
}

}  // namespace distcrown
