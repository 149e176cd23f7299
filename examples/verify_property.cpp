// Decides a VNNLIB property (attack, α-CROWN, branch and bound) and prints the VNN-COMP result:
// "unsat" (verified), "sat" with a counterexample, "timeout" or "unknown".
//   verify_property digits_mlp.onnx digits_mlp_prop.vnnlib
#include <cstdio>

#include <distcrown/distcrown.hpp>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s model.onnx property.vnnlib\n", argv[0]);
    return 2;
  }
  const auto problem = distcrown::io::load_problem(argv[1], argv[2]);
  distcrown::bab::VerifyOptions options;
  options.timeout_s = 60;
  const auto result = distcrown::bab::verify(problem.graph, problem.property, options);
  std::printf("%s", distcrown::bab::format_result(result).c_str());
  return 0;
}
