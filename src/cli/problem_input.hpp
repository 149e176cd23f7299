#pragma once
// The model and property a command works on: the files given, or the embedded default pair when
// neither is given. Keeps the raw bytes for fingerprints.
#include <optional>
#include <string>

#include "distcrown/io/problem.hpp"

namespace distcrown::cli {

struct ProblemInput {
  io::Problem problem;
  std::string model_bytes;
  std::string property_text;
};

/// The files of a problem (or the embedded default pair when both paths are empty), unparsed.
struct ProblemFiles {
  std::string model_bytes, model_name;
  std::string property_text, property_name;
};
ProblemFiles read_problem_files(const std::string& model, const std::string& vnnlib);

/// A problem's files, read, and its property, parsed: what verify looks at before any graph is
/// built (bab/enumeration.hpp), then hands to the load instead of reading them again.
struct ReadProblem {
  ProblemFiles files;
  io::VnnlibProperty property;
};
ReadProblem read_problem(const std::string& model, const std::string& vnnlib);

/// Loads and checks (io::check_fits) the pair; both paths empty = the embedded default.
/// `read`: the files already read (read_problem). `may_peel_softmax` (verify): the model's output
/// Softmax is left out where the property compares outputs only (io::Problem).
ProblemInput load_problem_input(const std::string& model, const std::string& vnnlib,
                                std::optional<ReadProblem> read = std::nullopt,
                                bool may_peel_softmax = false);

}  // namespace distcrown::cli
