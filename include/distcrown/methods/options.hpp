#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace distcrown {

enum class Method { kIbp, kCrown, kAlphaCrown };

/// Names of the methods (util/enum_names.hpp): canonical first, then auto_LiRPA's spellings.
constexpr auto enum_table(Method) {
  using P = std::pair<Method, std::string_view>;
  return std::array{P{Method::kIbp, "ibp"},
                    P{Method::kCrown, "crown"},
                    P{Method::kAlphaCrown, "alpha-crown"},
                    P{Method::kIbp, "IBP"},
                    P{Method::kCrown, "CROWN"},
                    P{Method::kAlphaCrown, "alpha_crown"},
                    P{Method::kAlphaCrown, "CROWN-Optimized"}};
}

/// How CROWN obtains the pre-activation (intermediate) bounds that the ReLU relaxations need.
enum class IntermediateScheme {
  /// auto_LiRPA's default: one IBP step from the bounds already computed gives a reference; the
  /// neurons stable under it keep it, the unstable ones get CROWN bounds, not intersected with the
  /// reference; when more than 90 % are unstable every neuron gets CROWN bounds.
  kAutoLirpa,
  /// CROWN for every pre-activation neuron, intersected with the IBP reference (and the final
  /// bounds intersected with IBP too): never looser than either, costs a full backward per layer.
  kTight,
  /// CROWN for every pre-activation neuron, not intersected with anything: auto_LiRPA with
  /// sparse_intermediate_bounds (and sparse α) off, as the fixtures' ViT references were made.
  /// α-CROWN then holds α for every neuron of every start.
  kEvery,
  /// kTight for the neurons the IBP reference leaves unstable, each batch element its own (a
  /// stable neuron's relaxation is exact whatever its bounds, so only the IBP chain through it
  /// loses): the rows of a pass are the most any element has, not every neuron. Input splitting's
  /// default (its boxes, small deep in the search, leave most neurons stable). Passes whose
  /// relaxation hook reads the rows (α-CROWN's α are per row) bound every neuron, as kTight.
  kTightUnstable,
};

constexpr auto enum_table(IntermediateScheme) {
  using P = std::pair<IntermediateScheme, std::string_view>;
  return std::array{P{IntermediateScheme::kAutoLirpa, "auto_lirpa"},
                    P{IntermediateScheme::kTight, "tight"}, P{IntermediateScheme::kEvery, "every"},
                    P{IntermediateScheme::kTightUnstable, "tight_unstable"}};
}

/// Whether a scheme intersects CROWN's bounds with IBP's (intermediate and final).
constexpr bool intersects_ibp(IntermediateScheme s) {
  return s == IntermediateScheme::kTight || s == IntermediateScheme::kTightUnstable;
}

/// How CROWN bounds the pre-activation neurons of a tensor-parallel layer (a node whose output is
/// sharded over ranks, BoundNode::output_shard()).
enum class ShardedIntermediate {
  /// The reference IBP interval, no communication (the `tp` plan; sound, looser with each zone).
  kIbp,
  /// CROWN across the earlier zones, as for any other node (the `tp-exact` plan; equal to P = 1
  /// up to rounding).
  kCrown,
};

/// How CROWN represents the A matrices of passes that start on a [C, H, W] node.
enum class ConvMode {
  /// Dense [rows, batch, *shape] everywhere.
  kMatrix,
  /// auto_LiRPA's patches (bounds/patches.hpp) while the pass goes through operators that take
  /// them (Conv, ReLU, BatchNorm, Add/Sub, AveragePool, Pad), dense from the first one that does
  /// not. CROWN and α-CROWN passes (α read at each row's window), spec-parallel too; β-CROWN's
  /// passes (split multipliers, branching scores) stay dense.
  kPatches,
};

constexpr auto enum_table(ConvMode) {
  using P = std::pair<ConvMode, std::string_view>;
  return std::array{P{ConvMode::kMatrix, "matrix"}, P{ConvMode::kPatches, "patches"}};
}

struct BoundOptions {
  IntermediateScheme scheme = IntermediateScheme::kAutoLirpa;
  /// Bound at most this many intermediate neurons (rows of A) per backward pass; 0 = as many as
  /// pass_bytes allows. Like auto_LiRPA's crown_batch_size: keeps A matrices at [N, batch, *shape].
  int64_t crown_batch_size = 0;
  /// With crown_batch_size 0: the rows of a pass are as many as keep its A matrices under this
  /// many bytes, estimated at 8 tensors per row of the widest node the pass can reach (both
  /// sides and the temporaries of a step), in multiples of 16 rows; 0 = every row at once. A
  /// convolutional layer's 32,768 neurons on a 32×32 map otherwise make one pass of gigabytes.
  int64_t pass_bytes = int64_t{256} << 20;
  /// With crown_batch_size 0, passes with patches A (conv_mode kPatches) outside autograd
  /// (CROWN's; α-CROWN's optimised passes are not) take, besides pass_bytes' limit, as many rows
  /// as keep the largest A of the pass (one side, patches or dense, as measured on the pass's
  /// first chunk of 32 rows) under this many bytes, in multiples of 16 rows; 0 = pass_bytes
  /// alone. A patches step's temporaries are several times its A (the
  /// ReLU's relaxation read at every row's window, the transposed convolution's columns), and a
  /// patches pass does elementwise work and convolutions that cost the same per row in any
  /// number of rows beyond a few dozen: on cifar10_resnet_2b CROWN's pass of 712 rows peaked at
  /// 50 MB, the same rows in passes of 2 MiB A (176 rows) at 13 MB, in the same time
  /// (docs/results.md "Patches mode"); passes of 8 rows took 3× the time.
  int64_t patches_pass_bytes = int64_t{2} << 20;
  /// Fraction of unstable neurons above which all neurons of a layer get CROWN bounds.
  double minimum_sparsity = 0.9;
  /// Pad every backward pass to a multiple of 16 rows so that a row's bits do not depend on the
  /// rows beside it (chunking and spec-parallel splitting stay bitwise equal to one pass;
  /// docs/architecture.md). Branch and bound, whose passes have a row or two and a large batch,
  /// turns it off: padding one row to sixteen multiplies its A matrices by sixteen.
  bool align_rows = true;
  /// Bounds of neurons inside tensor-parallel zones.
  ShardedIntermediate sharded_intermediate = ShardedIntermediate::kCrown;
  /// Representation of A in passes that start on convolutional feature maps: patches, as
  /// auto_LiRPA's default (about half the time of dense A on the fixture CNNs, bounds equal to
  /// rounding; docs/results.md "Patches mode").
  ConvMode conv_mode = ConvMode::kPatches;
};

/// The refusal of spec-parallel bounding (bounds' rows, branch and bound's domains split over
/// the ranks) with tensor parallelism, wherever it is checked: one message.
std::string spec_parallel_tensor_parallel_refusal();

/// Thin wrappers over parse_enum / enum_name (util/enum_names.hpp).
Method parse_method(const std::string& name);
std::string to_string(Method m);

}  // namespace distcrown
