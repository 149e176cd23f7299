#pragma once
// Branch and bound by input splitting, for networks with few inputs (ACAS Xu: 5): a domain is a
// sub-box; a batch of sub-boxes is bounded by CROWN in one call (every intermediate bound
// recomputed on each sub-box, so splitting tightens everything); the split dimension maximises
// |A_i|·radius_i of the domain's most promising row (the part of the bound's looseness that
// dimension contributes at the input), and the box is halved there.
#include <vector>

#include "distcrown/bab/bab.hpp"
#include "distcrown/bab/objective.hpp"
#include "distcrown/graph/bound_graph.hpp"
#include "distcrown/io/vnnlib.hpp"
#include "distcrown/methods/options.hpp"

namespace distcrown::bab {

BabResult input_bab(const BoundGraph& g, const io::VnnlibCase& c, const Objective& objective,
                    const std::vector<Objective>& disjuncts, const BabOptions& options,
                    const Deadline& deadline, const BoundOptions& bound_options = {});

}  // namespace distcrown::bab
