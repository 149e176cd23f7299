#pragma once
// CROWN: backward linear bound propagation with intermediate (pre-activation) bounds computed
// node by node in topological order (scheme in options.hpp). A matrices live only while they are
// propagated: the one for a node is dropped as soon as its inputs' are computed.
#include <optional>
#include <vector>

#include "distcrown/bounds/interval.hpp"
#include "distcrown/graph/bound_graph.hpp"
#include "distcrown/methods/options.hpp"

namespace distcrown {

class CrownEngine {
 public:
  CrownEngine(const BoundGraph& g, InputBox box, BoundOptions options);

  /// Computes every intermediate bound the output's backward pass needs.
  void compute_intermediate_bounds();

  /// Bounds of C·output, C [spec, n_out] (undefined = identity); lower/upper [batch, spec].
  Interval output_bounds(const at::Tensor& C = {});

  /// Interval of node i ([batch, *shape]); only after compute_intermediate_bounds().
  [[nodiscard]] const Interval& bounds(int i) const { return *bounds_.at(size_t(i)); }

  /// Linear bounds of `start`'s neurons `rows` (flat indices into its per-batch shape) w.r.t. the
  /// input, concretized: lower/upper [batch, rows]. Needs the bounds of every ReLU below start.
  Interval backward_rows(int start, const at::Tensor& rows);

  /// Backward pass from `start` with the given A ([spec, batch, *shape of start]).
  Interval backward_from(int start, BoundA a);

 private:
  Interval refine(int i, const Interval& reference);
  Interval chunked_rows(int start, const at::Tensor& rows);

  const BoundGraph& g_;
  InputBox box_;
  BoundOptions opt_;
  std::vector<std::optional<Interval>> bounds_;
};

/// IBP or CROWN bounds of C·output (see CrownEngine); lower/upper [batch, spec].
Interval compute_bounds(const BoundGraph& g, const InputBox& box, Method method,
                        const BoundOptions& options = {}, const at::Tensor& C = {});

}  // namespace distcrown
