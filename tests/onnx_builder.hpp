#pragma once
// Builds small ONNX models (io::OnnxModel) in tests, serializes them with serialize_onnx_model and
// writes them to temporary files:
//
//   OnnxBuilder b;
//   b.input("x", {1, 4}).output("y");
//   b.initializer("W", at::randn({3, 4}));
//   b.node("fc", "Gemm", {"x", "W"}, {"y"}, {attr_int("transB", 1)});
//   BoundGraph g = io::load_onnx_bytes(b.bytes(), "fc.onnx");
#include <ftw.h>     // nftw
#include <stdlib.h>  // mkdtemp

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "io/onnx_build.hpp"

namespace distcrown::testing {

// The factories live in the library (io/onnx_build.hpp); tests name them from here.
using io::attr_float;
using io::attr_int;
using io::attr_ints;
using io::attr_string;
using io::attr_tensor;
using io::onnx_tensor;

class OnnxBuilder {
 public:
  /// A float graph input; a dim < 0 is written as a symbolic dimension.
  OnnxBuilder& input(const std::string& name, std::vector<int64_t> dims) {
    model_.inputs.push_back({name, true, io::kOnnxFloat, true, std::move(dims)});
    return *this;
  }
  OnnxBuilder& output(const std::string& name, std::vector<int64_t> dims = {}) {
    model_.outputs.push_back({name, true, io::kOnnxFloat, true, std::move(dims)});
    return *this;
  }
  OnnxBuilder& initializer(const std::string& name, const at::Tensor& t) {
    model_.initializers.push_back(onnx_tensor(name, t));
    return *this;
  }
  OnnxBuilder& node(const std::string& name, const std::string& op_type,
                    std::vector<std::string> inputs, std::vector<std::string> outputs,
                    std::vector<io::OnnxAttribute> attributes = {}) {
    model_.nodes.push_back(
        {name, op_type, "", std::move(inputs), std::move(outputs), std::move(attributes)});
    return *this;
  }

  io::OnnxModel& model() { return model_; }
  [[nodiscard]] std::string bytes() const { return io::serialize_onnx_model(model_); }

 private:
  io::OnnxModel model_;
};

/// A fresh directory under the system temp dir, removed with its contents on destruction.
/// (Not with std::filesystem::remove_all: the PyPI libtorch.so exports its own copy of that
/// symbol, which crashes when called from a program linked against libtorch.)
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/distcrown_test_XXXXXX";
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed: " + tmpl);
    path_ = tmpl;
  }
  ~TempDir() {
    nftw(
        path_.c_str(),
        [](const char* p, const struct stat*, int, struct FTW*) { return std::remove(p); }, 16,
        FTW_DEPTH | FTW_PHYS);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
  [[nodiscard]] std::filesystem::path operator/(const std::string& name) const {
    return path_ / name;
  }

 private:
  std::filesystem::path path_;
};

/// Writes `bytes` to `path` (binary) and returns the path.
inline std::filesystem::path write_file(const std::filesystem::path& path,
                                        const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
  return path;
}

/// The whole content of a file (binary).
inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace distcrown::testing
