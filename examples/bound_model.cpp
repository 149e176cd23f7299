// CROWN bounds of a network's outputs over a VNNLIB property's input box, through the public API.
//   bound_model digits_mlp.onnx digits_mlp_prop.vnnlib
// prints one line per output: "y<j> <lower> <upper>".
#include <cstdio>

#include <distcrown/distcrown.hpp>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s model.onnx property.vnnlib\n", argv[0]);
    return 2;
  }
  const auto problem = distcrown::io::load_problem(argv[1], argv[2]);
  // The smallest float32 box containing the property's box (bounds rounded outward), [1, 1, 8, 8]:
  // a box rounded to nearest could leave out inputs the property covers.
  const auto box =
      distcrown::io::enclosing_box(problem.property.cases.front(), problem.graph, at::kFloat);
  const distcrown::Interval b =
      distcrown::compute_bounds(problem.graph, box, distcrown::Method::kCrown);
  // b.lower, b.upper: [batch 1, outputs 10]
  for (int64_t j = 0; j < b.lower.size(1); ++j) {
    std::printf("y%lld %.9g %.9g\n", static_cast<long long>(j), b.lower[0][j].item<double>(),
                b.upper[0][j].item<double>());
  }
  return 0;
}
