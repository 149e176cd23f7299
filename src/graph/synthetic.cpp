#include "distcrown/graph/synthetic.hpp"

#include <cmath>

#include <ATen/ATen.h>

#include "distcrown/ops/linear.hpp"
#include "distcrown/ops/relu.hpp"

namespace distcrown {

BoundGraph make_random_mlp(int64_t in, int64_t hidden, int depth, int64_t out, uint64_t seed) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  auto uniform = [&](std::vector<int64_t> shape, int64_t fan_in) {
    const double k = 1.0 / std::sqrt(double(fan_in));
    return at::empty(shape, at::kFloat).uniform_(-k, k, gen);
  };
  GraphBuilder b({1, in});
  int x = b.input();
  int64_t width = in;
  for (int layer = 0; layer <= depth; ++layer) {
    const int64_t next = layer == depth ? out : hidden;
    const std::string name = "fc" + std::to_string(layer);
    x = b.add(name,
              ops::make_linear(make_param(uniform({next, width}, width)),
                               make_param(uniform({next}, width))),
              {x});
    if (layer < depth) x = b.add("relu" + std::to_string(layer), ops::make_relu(), {x});
    width = next;
  }
  return std::move(b).finish(x);
}

}  // namespace distcrown
