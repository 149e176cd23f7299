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
  io::VnnlibProperty property =
      io::parse_vnnlib_string(in.property_text, embedded ? kEmbeddedPropertyName : vnnlib);
  const std::string model_name = embedded ? kEmbeddedModelName : model;
  if (io::needs_product(property)) {
    // One load of the model per declared network: the product graph owns each copy's nodes.
    std::vector<BoundGraph> copies;
    for (size_t k = 0; k < property.networks.size(); ++k) {
      copies.push_back(io::load_onnx_bytes(in.model_bytes, model_name));
    }
    in.problem = io::product_problem(std::move(copies), property);
  } else {
    in.problem = {io::load_onnx_bytes(in.model_bytes, model_name), std::move(property)};
  }
  io::check_fits(in.problem.graph, in.problem.property);
  return in;
}

}  // namespace distcrown::cli
