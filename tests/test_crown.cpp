// CrownEngine (methods/crown.hpp) over a batch of boxes: each element bounds its own unstable
// neurons, as branch and bound's batches of domains need.

#include "bab_testing.hpp"

namespace distcrown {
namespace {

using namespace bab_testing;

// A hook that only observes, as input splitting's: passes may then give each element its rows.
class ObservingHook final : public RelaxationHook {
 public:
  RelaxParams params(int /*start*/, int /*node*/, const at::Tensor& /*rows*/,
                     std::span<const Interval* const> /*in*/) override {
    return {};
  }
  [[nodiscard]] bool reads_rows() const override { return false; }
};

// A batch of boxes (as branch and bound bounds batches of domains) whose unstable neurons
// differ: every element's intermediate bounds equal those of its box bounded alone (its own
// unstable neurons get CROWN rows, its stable ones keep their reference), not those of a pass
// over the union of the batch's unstable neurons. Under the default scheme and under
// tight_unstable (input splitting's), with no hook or one that only observes.
TEST(CrownBatch, EachElementBoundsItsOwnUnstableNeurons) {
  const std::vector<Layer> layers = random_layers({4, 40, 40, 40, 2}, 31);
  const Net net = build(layers, at::kDouble);
  at::Generator gen = at::detail::createCPUGenerator(8);
  std::vector<InputBox> boxes;
  std::vector<at::Tensor> lowers, uppers;
  for (int b = 0; b < 4; ++b) {
    const InputBox x = box_around(gen, 4, 0.1);
    boxes.push_back({x.lower.to(at::kDouble), x.upper.to(at::kDouble)});
    lowers.push_back(boxes.back().lower);
    uppers.push_back(boxes.back().upper);
  }
  for (const auto scheme : {IntermediateScheme::kAutoLirpa, IntermediateScheme::kTightUnstable}) {
    for (const bool hooked : {false, true}) {
      SCOPED_TRACE(std::string(enum_name(scheme)) + (hooked ? ", observing hook" : ""));
      BoundOptions o;
      o.scheme = scheme;
      ObservingHook hook;
      CrownEngine together(net.graph, {at::cat(lowers), at::cat(uppers)}, o);
      if (hooked) together.set_hook(&hook);
      together.compute_intermediate_bounds();
      int64_t unstable = 0;
      for (size_t b = 0; b < boxes.size(); ++b) {
        CrownEngine alone(net.graph, boxes[b], o);
        alone.compute_intermediate_bounds();
        for (size_t r = 0; r < net.pres.size(); ++r) {
          SCOPED_TRACE("box " + std::to_string(b) + ", layer " + std::to_string(r));
          const Interval& one = alone.bounds(net.pres[r]);
          const Interval& all = together.bounds(net.pres[r]);
          unstable += ((one.lower < 0) & (one.upper > 0)).sum().item<int64_t>();
          expect_bounds(all.lower.narrow(0, int64_t(b), 1), one.lower, true, "lower");
          expect_bounds(all.upper.narrow(0, int64_t(b), 1), one.upper, true, "upper");
        }
      }
      EXPECT_GT(unstable, 0) << "no unstable neuron: the comparison covers no CROWN row";
    }
  }
}

}  // namespace
}  // namespace distcrown
