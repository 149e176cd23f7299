#pragma once
// Access to ../shared/fixtures (VNN-COMP models, VNNLIB specs, auto_LiRPA reference bounds).
// Tests that need them call DISTCROWN_REQUIRE_FIXTURES() and are skipped, with the path, when
// the folder is absent (a user's clone). With DISTCROWN_REQUIRE_FIXTURES=1 in the environment
// (CI, .ci/run) a missing folder is a failure instead: a CI run must not pass by skipping.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "distcrown/bounds/interval.hpp"
#include "distcrown/methods/options.hpp"

namespace distcrown::testing {

/// The fixtures folder: $DISTCROWN_FIXTURES_DIR when set (to point a built test elsewhere),
/// else the configured one (CMake's DISTCROWN_FIXTURES_DIR).
inline std::filesystem::path fixtures_dir() {
  const char* env = std::getenv("DISTCROWN_FIXTURES_DIR");
  return env != nullptr && *env != 0 ? std::filesystem::path(env)
                                     : std::filesystem::path(DISTCROWN_FIXTURES_DIR);
}
inline bool have_fixtures() { return std::filesystem::is_directory(fixtures_dir() / "refs"); }
/// DISTCROWN_REQUIRE_FIXTURES=1: missing fixtures fail the test instead of skipping it.
inline bool fixtures_required() {
  const char* v = std::getenv("DISTCROWN_REQUIRE_FIXTURES");
  return v != nullptr && std::string(v) == "1";
}
/// Records a failure when fixtures are required but absent; true when they are present.
inline bool check_fixtures_present() {
  if (have_fixtures()) return true;
  if (fixtures_required()) {
    ADD_FAILURE() << "shared fixtures not found at " << ::distcrown::testing::fixtures_dir()
                  << " and DISTCROWN_REQUIRE_FIXTURES=1";
  }
  return false;
}

#define DISTCROWN_REQUIRE_FIXTURES()                                                          \
  do {                                                                                        \
    if (!::distcrown::testing::have_fixtures()) {                                             \
      if (::distcrown::testing::fixtures_required())                                          \
        FAIL() << "shared fixtures not found at " << ::distcrown::testing::fixtures_dir()     \
               << " and DISTCROWN_REQUIRE_FIXTURES=1";                                        \
      GTEST_SKIP() << "shared fixtures not found at " << ::distcrown::testing::fixtures_dir() \
                   << " (clone beside ../shared to run this test)";                           \
    }                                                                                         \
  } while (0)

/// Every reference JSON in fixtures/refs, sorted by name (none, and a failure when required,
/// without the fixtures). The refs/ops cases are ops_reference_files().
inline std::vector<std::filesystem::path> reference_files() {
  std::vector<std::filesystem::path> out;
  if (!check_fixtures_present()) return out;
  for (const auto& e : std::filesystem::directory_iterator(fixtures_dir() / "refs")) {
    if (e.path().extension() == ".json") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// The cases of fixtures/refs/ops (networks beyond ReLU) whose operators this library has: the
/// reference tests check them as they check refs/*.json, and their models must load. A case
/// joins this list when its operators land.
inline const std::vector<std::string>& supported_ops_cases() {
  static const std::vector<std::string> names{"eran_sigmoid_6x200_idx_56",
                                              "verivital_avgpool_prop_0", "vit_pgd_2_3_16_4021",
                                              "vit_pgd_2_3_16_9907"};
  return names;
}

/// The JSON files of supported_ops_cases() (none, and a failure when required, without the
/// fixtures).
inline std::vector<std::filesystem::path> ops_reference_files() {
  std::vector<std::filesystem::path> out;
  if (!check_fixtures_present()) return out;
  for (const std::string& name : supported_ops_cases()) {
    out.push_back(fixtures_dir() / "refs" / "ops" / (name + ".json"));
  }
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

/// The intermediate scheme a reference's `method` ("crown" or "alpha_crown") was computed with:
/// auto_LiRPA's default sparse intermediate bounds, or every neuron where the case turned them
/// off (the ViT refs: `sparse_intermediate_bounds: false`, fixtures README).
inline IntermediateScheme reference_scheme(const nlohmann::json& ref, const std::string& method) {
  const auto& opts = ref["bound_opts"]["effective_bound_opts_" + method];
  const bool sparse = !opts.contains("sparse_intermediate_bounds") ||
                      opts["sparse_intermediate_bounds"].get<bool>();
  return sparse ? IntermediateScheme::kAutoLirpa : IntermediateScheme::kEvery;
}

}  // namespace distcrown::testing
