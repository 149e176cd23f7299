#pragma once
// Access to ../shared/fixtures (VNN-COMP models, VNNLIB specs, auto_LiRPA reference bounds).
// Tests that need them call DISTCROWN_REQUIRE_FIXTURES() and are skipped, with the path, when
// the folder is absent (a user's clone).
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace distcrown::testing {

inline std::filesystem::path fixtures_dir() { return DISTCROWN_FIXTURES_DIR; }
inline bool have_fixtures() { return std::filesystem::is_directory(fixtures_dir() / "refs"); }

#define DISTCROWN_REQUIRE_FIXTURES()                                            \
  do {                                                                          \
    if (!::distcrown::testing::have_fixtures())                                 \
      GTEST_SKIP() << "shared fixtures not found at " << DISTCROWN_FIXTURES_DIR \
                   << " (clone beside ../shared to run this test)";             \
  } while (0)

/// Every reference JSON in fixtures/refs, sorted by name.
inline std::vector<std::filesystem::path> reference_files() {
  std::vector<std::filesystem::path> out;
  if (!have_fixtures()) return out;
  for (const auto& e : std::filesystem::directory_iterator(fixtures_dir() / "refs")) {
    if (e.path().extension() == ".json") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

inline nlohmann::json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

}  // namespace distcrown::testing
