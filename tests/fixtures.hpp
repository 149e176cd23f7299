#pragma once
// Access to ../shared/fixtures (VNN-COMP models, VNNLIB specs, auto_LiRPA reference bounds).
// Tests that need them call DISTCROWN_REQUIRE_FIXTURES() and are skipped, with the path, when
// the folder is absent (a user's clone).
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "distcrown/bounds/interval.hpp"

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

/// The input box stored in a reference JSON ([1, *input_shape]): the float32 values auto_LiRPA
/// used, as `dtype`.
inline Interval reference_box(const nlohmann::json& ref, at::ScalarType dtype = at::kFloat) {
  const auto shape = ref["input_shape"].get<std::vector<int64_t>>();
  auto side = [&](const char* key) {
    return at::tensor(ref[key].get<std::vector<double>>(), at::kDouble)
        .to(at::kFloat)
        .to(dtype)
        .reshape(shape);
  };
  return {side("input_lower"), side("input_upper")};
}

}  // namespace distcrown::testing
