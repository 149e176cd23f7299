#pragma once
// The shape of an error message (util/error.hpp): one line, or, for an UnsupportedError naming
// several nodes, a first line followed by one line per node that starts with
// kUnsupportedListItem ("  node 'name' (Op): why").
#include <sstream>
#include <string>
#include <vector>

#include "distcrown/util/error.hpp"

namespace distcrown::testing {

inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  if (!text.empty() && text.back() == '\n')
    out.emplace_back();  // a trailing newline: an empty line
  return out;
}

/// The node lines of a multi-node UnsupportedError (empty for a one-line message).
inline std::vector<std::string> listed_nodes(const std::string& what) {
  std::vector<std::string> lines = lines_of(what);
  if (lines.empty()) return {};
  lines.erase(lines.begin());
  return lines;
}

/// True for a non-empty one-line message, or a first line then node lines (each starting with
/// kUnsupportedListItem and holding text after it).
inline bool is_well_formed_error(const std::string& what) {
  const std::vector<std::string> lines = lines_of(what);
  if (lines.empty() || lines.front().empty()) return false;
  const std::string item = kUnsupportedListItem;
  for (size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].size() <= item.size() || lines[i].compare(0, item.size(), item) != 0) return false;
  }
  return true;
}

}  // namespace distcrown::testing
