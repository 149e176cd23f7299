// Bounds a model over a property through the installed library: prints "ok" when CROWN's lower
// bounds are below its upper bounds for every output.
#include <ATen/ATen.h>

#include <cstdio>

#include <distcrown/io/problem.hpp>
#include <distcrown/methods/compute_bounds.hpp>

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  auto problem = distcrown::io::load_problem(argv[1], argv[2]);
  auto box = distcrown::io::box_of(problem.property.cases.front(), problem.graph, at::kFloat);
  auto b = distcrown::compute_bounds(problem.graph, box, distcrown::Method::kCrown);
  const bool ok = b.lower.le(b.upper).all().item<bool>();
  std::printf("%s\n", ok ? "ok" : "bad bounds");
  return ok ? 0 : 1;
}
