// CROWN passes with patches A (ConvMode::kPatches, bounds/patches.hpp): intermediate bounds of a
// [C, H, W] node start as 1×1 windows, travel as patches through the nodes that take them
// (OpTraits::patches) and turn dense at the first node that does not, or where the dense A is no
// larger (a window covering the whole node). The input box is concretized from patches directly.
#include <algorithm>
#include <map>
#include <optional>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "backward_walk.hpp"
#include "distcrown/methods/crown.hpp"
#include "distcrown/util/error.hpp"
#include "row_align.hpp"

namespace distcrown {
namespace {

// An A waiting at a node: patches, or dense once it has left them.
struct PendingA {
  std::optional<PatchesA> patches;
  BoundA dense;

  /// A defined side of whichever form it is in (for its shape).
  [[nodiscard]] const at::Tensor& any() const {
    if (patches) return patches->any();
    return dense.lA.defined() ? dense.lA : dense.uA;
  }
};

BoundA dense_of(const PatchesA& p, const std::vector<int64_t>& shape) {
  return to_dense(p, shape.at(2), shape.at(3));
}

void add_dense(BoundA& a, const BoundA& b) {
  if (a.lA.defined() && a.lA.is_same(a.uA) && b.lA.defined() && b.lA.is_same(b.uA)) {
    a.lA = a.lA + b.lA;
    a.uA = a.lA;
    return;
  }
  accumulate(a.lA, b.lA);
  accumulate(a.uA, b.uA);
}

// Adds `in` into `slot` (A reaching one node along several paths, e.g. a residual Add): patches
// with the same stride stay patches, anything else is added dense.
void merge(PendingA& slot, PendingA in, const std::vector<int64_t>& shape) {
  if (slot.patches && in.patches) {
    if (auto sum = add_patches(*slot.patches, *in.patches)) {
      slot.patches = std::move(sum);
      return;
    }
  }
  if (slot.patches) {
    slot.dense = dense_of(*slot.patches, shape);
    slot.patches.reset();
  }
  if (in.patches) in.dense = dense_of(*in.patches, shape);
  add_dense(slot.dense, in.dense);
}

// Rows of the pass that measures the others' size (patches_rows): large enough that its per-node
// overheads do not dominate, small enough that it stays under any budget worth setting.
constexpr int64_t kFirstPatchesChunk = 32;

}  // namespace

bool CrownEngine::uses_patches(int start) const {
  if (opt_.conv_mode != ConvMode::kPatches) return false;
  if (hook_ != nullptr && !hook_->takes_patches()) return false;
  return g_.node(start).shape.size() == 4 && g_.node(start).op->traits().patches;
}

Interval CrownEngine::patches_rows(int start, const at::Tensor& rows) {
  const auto& shape = g_.node(start).shape;  // [1, C, H, W]
  const int64_t B = box_.lower.size(0);
  const int64_t k = rows.numel();
  const int64_t most = rows_per_pass(start, k);
  // Without crown_batch_size, the first chunk measures the largest A a row makes on this pass
  // (the windows' growth depends on the layers below, not on the row) and sizes the rest by
  // patches_pass_bytes. Chunks are multiples of kRowAlign rows: with align_rows each row's bits are
  // those of one pass, and every spec-parallel rank (same row count, same shapes) makes the
  // same chunks and so the same collective calls.
  // Under α-CROWN's autograd every chunk's graph lives until the loss's backward anyway, and
  // smaller passes only cost time there (cifar10_resnet_2b prop 1: ~10 %): not chunked further.
  const bool measure =
      opt_.crown_batch_size == 0 && opt_.patches_pass_bytes > 0 && !at::GradMode::is_enabled();
  int64_t chunk = measure ? std::min(most, kFirstPatchesChunk) : most;
  std::vector<at::Tensor> lower;
  std::vector<at::Tensor> upper;
  for (int64_t s = 0, n = 0; s < k; s += n) {
    n = std::min(k, s + chunk) - s;
    const at::Tensor slice = rows.slice(0, s, s + n);
    const at::Tensor pass = opt_.align_rows ? pad_rows(slice) : slice;
    PatchesA a = identity_patches(pass, shape[1], shape[2], shape[3], B, box_.lower.options());
    int64_t largest = 0;
    const Interval part = backward_from_patches(start, std::move(a), pass, &largest);
    lower.push_back(part.lower.slice(1, 0, n));
    upper.push_back(part.upper.slice(1, 0, n));
    if (measure && s == 0) {
      const int64_t per_row = std::max<int64_t>(largest / pass.numel(), 1);
      chunk =
          std::clamp(opt_.patches_pass_bytes / per_row / kRowAlign * kRowAlign, kRowAlign, most);
    }
  }
  if (lower.size() == 1) return {lower.front(), upper.front()};
  return {at::cat(lower, 1), at::cat(upper, 1)};
}

Interval CrownEngine::backward_from_patches(int start, PatchesA a, const at::Tensor& rows,
                                            int64_t* largest_a) {
  std::map<int, PendingA> pending;
  pending[start].patches = std::move(a);
  BiasPair bias;
  std::vector<const Interval*> in_bounds;
  const auto step = [&](int i, const GraphNode& node, PendingA& here) {
    if (largest_a != nullptr) {
      *largest_a = std::max(*largest_a, here.any().numel() * here.any().element_size());
    }
    watch_deadline(here.patches ? here.patches->lA : here.dense.lA);
    step_inputs(node, in_bounds);
    if (here.patches && !node.op->traits().patches) {
      here.dense = dense_of(*here.patches, node.shape);
      here.patches.reset();
    }
    std::vector<PendingA> outs;
    if (here.patches) {
      std::vector<PatchesA> mapped;
      if (hook_ != nullptr && node.op->has_relaxation_params()) {
        RelaxParams p = hook_->window_params(start, i, rows, in_bounds, *here.patches);
        if (!node.op->traits().reads_alpha_source) p = resolved_alpha(std::move(p));
        mapped = node.op->backward_patches_relaxed(*here.patches, in_bounds, bias, p);
      } else {
        mapped = node.op->backward_patches(*here.patches, in_bounds, bias);
      }
      for (PatchesA& p : mapped) {
        PendingA out;
        out.patches = std::move(p);
        outs.push_back(std::move(out));
      }
    } else {
      std::vector<BoundA> mapped =
          dense_step(start, i, here.dense, in_bounds, bias, rows, /*observe=*/false);
      for (BoundA& d : mapped) {
        PendingA out;
        out.dense = std::move(d);
        outs.push_back(std::move(out));
      }
    }
    return outs;
  };
  // Patches on a node that is not a feature map, or whose windows cover it: dense.
  const auto settle = [&](PendingA& out, int p) {
    const auto& in_shape = g_.node(p).shape;
    if (!out.patches) return;
    if (in_shape.size() != 4) {
      throw Error("internal: patches reached node '" + g_.node(p).name +
                  "', which is not [C, H, W]");
    }
    const auto kernel = out.patches->kernel();
    if (kernel[0] * kernel[1] >= in_shape[2] * in_shape[3]) {
      out.dense = dense_of(*out.patches, in_shape);
      out.patches.reset();
    }
  };
  walk_backward(
      g_, start, pending, checkpoint_, step, settle,
      [&](PendingA& slot, PendingA in, int p) { merge(slot, std::move(in), g_.node(p).shape); });
  const auto it = pending.find(0);
  if (it == pending.end()) throw Error("internal: backward pass did not reach the input");
  const PendingA& at_input = it->second;
  const at::Tensor& any = at_input.any();
  if (largest_a != nullptr) *largest_a = std::max(*largest_a, any.numel() * any.element_size());
  const int64_t R = any.size(0);
  const int64_t B = box_.lower.size(0);
  if (!bias.lower.defined()) bias.lower = at::zeros({R, B}, box_.lower.options());
  if (!bias.upper.defined()) bias.upper = at::zeros({R, B}, box_.lower.options());
  if (at_input.patches) return concretize_patches(*at_input.patches, bias, box_);
  return concretize(at_input.dense, bias, box_);
}

}  // namespace distcrown
