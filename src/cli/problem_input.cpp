#include "cli/problem_input.hpp"

#include <fstream>
#include <sstream>

#include "cli/embedded_default.hpp"
#include "distcrown/io/onnx_loader.hpp"
#include "distcrown/util/error.hpp"

namespace distcrown::cli {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open");
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

}  // namespace

ProblemInput load_problem_input(const std::string& model, const std::string& vnnlib) {
  if (model.empty() != vnnlib.empty()) {
    throw InvalidArgument("give both --model and --vnnlib, or neither for the embedded default");
  }
  const bool embedded = model.empty();
  ProblemInput in;
  in.model_bytes = embedded ? embedded_model_bytes() : read_file(model);
  in.property_text = embedded ? embedded_property_text() : read_file(vnnlib);
  const std::string model_name = embedded ? kEmbeddedModelName : model;
  in.problem = io::problem_of(
      [&] { return io::load_onnx_bytes(in.model_bytes, model_name); },
      io::parse_vnnlib_string(in.property_text, embedded ? kEmbeddedPropertyName : vnnlib));
  return in;
}

}  // namespace distcrown::cli
