#pragma once
// Properties of many cases, each with its own input box (nn4sys lindex: up to 20,000 disjuncts,
// each a 1-D box with one output row), are mostly proved by CROWN on each box. One pass per
// chunk of boxes bounds every case at once instead of an attack and a search per case.
#include <vector>

#include "distcrown/bab/objective.hpp"
#include "distcrown/graph/bound_graph.hpp"
#include "distcrown/io/vnnlib.hpp"
#include "distcrown/methods/options.hpp"
#include "distcrown/methods/pass_context.hpp"

namespace distcrown::bab {

/// The most distinct objective rows a screen bounds (every box gets every row).
constexpr int64_t kMaxScreenRows = 64;

/// Which cases CROWN proves on their own boxes: the distinct rows of every case's objectives
/// (objectives[i], one per disjunct of property.cases[i]) bounded over chunks of the cases'
/// boxes (the boxes batched, as input splitting bounds sub-boxes), a case proved when each of its
/// disjuncts has a row whose finite lower bound exceeds its threshold. Every case unproved
/// (nothing bounded) when the rows number more than kMaxScreenRows. The passes run in `passes`.
std::vector<bool> screen_cases(const BoundGraph& g, const io::VnnlibProperty& property,
                               const std::vector<std::vector<Objective>>& objectives,
                               const BoundOptions& options, const PassContext& passes);

}  // namespace distcrown::bab
