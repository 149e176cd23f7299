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

ProblemFiles read_problem_files(const std::string& model, const std::string& vnnlib) {
  if (model.empty() != vnnlib.empty()) {
    throw InvalidArgument("give both --model and --vnnlib, or neither for the embedded default");
  }
  const bool embedded = model.empty();
  ProblemFiles f;
  f.model_bytes = embedded ? embedded_model_bytes() : read_file(model);
  f.model_name = embedded ? kEmbeddedModelName : model;
  f.property_text = embedded ? embedded_property_text() : read_file(vnnlib);
  f.property_name = embedded ? kEmbeddedPropertyName : vnnlib;
  return f;
}

ReadProblem read_problem(const std::string& model, const std::string& vnnlib) {
  ProblemFiles f = read_problem_files(model, vnnlib);
  io::VnnlibProperty property = io::parse_vnnlib_string(f.property_text, f.property_name);
  return {std::move(f), std::move(property)};
}

ProblemInput load_problem_input(const std::string& model, const std::string& vnnlib,
                                std::optional<ReadProblem> read, bool may_peel_softmax) {
  if (!read) read = read_problem(model, vnnlib);
  ProblemFiles& f = read->files;
  io::VnnlibProperty& property = read->property;
  const io::OnnxLoadOptions options{.peel_output_softmax =
                                        may_peel_softmax && io::compares_outputs_only(property)};
  bool peeled = false;
  ProblemInput in;
  in.problem = io::problem_of(
      [&] {
        io::LoadedOnnx loaded = io::load_onnx_bytes(f.model_bytes, f.model_name, options);
        peeled = loaded.output_softmax_peeled;
        return std::move(loaded.graph);
      },
      std::move(property));
  in.problem.output_softmax_peeled = peeled;
  in.model_bytes = std::move(f.model_bytes);
  in.property_text = std::move(f.property_text);
  return in;
}

}  // namespace distcrown::cli
