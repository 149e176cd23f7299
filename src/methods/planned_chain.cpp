#include "methods/planned_chain.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "methods/planned_common.hpp"

namespace distcrown {
namespace {

using planned::centre_and_radius;
using planned::centre_radius_dots;
using planned::Dense;
using planned::gemm_rows;
using planned::kLanes;
using planned::kMinColumns;
using planned::kVecLanes;
using planned::kVecs;
using planned::load;
using planned::padded;
using planned::Scratch;
using planned::store;
using planned::times_by_rows;
using planned::total;
using planned::Vec;

// Boxes bounded in one pass: a pass's rows (up to 2·width per box and layer) then stay in the
// caches; a larger batch is bounded in pieces of this many.
constexpr int64_t kBoxesPerPass = 32;

// One row through a ReLU step and the bias of the affine map before it (ops/relu.cpp
// relax_side): o = pos·pos_d + neg·neg_d with pos = max(a, 0), neg = a − pos; returns the
// intercepts the row takes, Σ (kUpper ? pos : neg)·b_u, plus Σ o·bias. P a multiple of kLanes.
template <class T, bool kUpper>
T relax_row(const T* a, const T* pos_d, const T* neg_d, const T* b_u, const T* bias, T* o,
            int64_t P) {
  constexpr int64_t V = kVecs<T>;
  constexpr int64_t W = kVecLanes<T>;
  Vec<T> taken[V] = {};
  Vec<T> through[V] = {};
  const Vec<T> zero{};
  Vec<T> v;
  Vec<T> w;
  Vec<T> out;
  for (int64_t i = 0; i < P; i += kLanes) {
    for (int64_t u = 0; u < V; ++u) {
      const int64_t at = i + u * W;
      load(a + at, v);
      const Vec<T> pos = v > zero ? v : zero;
      const Vec<T> neg = v - pos;
      taken[u] += (kUpper ? pos : neg) * load(b_u + at, w);
      out = pos * load(pos_d + at, w);
      out += neg * load(neg_d + at, w);
      store(o + at, out);
      through[u] += out * load(bias + at, w);
    }
  }
  return total<T>(taken) + total<T>(through);
}

template <class T>
class ChainPlanOf final : public PlannedChain {
 public:
  ChainPlanOf(std::vector<Dense> layers, Dense spec, at::Tensor C)
      : layers_(std::move(layers)),
        spec_(std::move(spec)),
        C_(std::move(C)),
        dtype_(C_.scalar_type()),
        L_(int(layers_.size()) - 1),
        state_(size_t(L_ + 1)) {
    for (const Dense& d : layers_) widest_ = std::max(widest_, padded(d.in));
    widest_ = std::max(widest_, padded(layers_.back().out));
  }

  ChainBounds bound(const InputBox& box, const Checkpoint& checkpoint) override;

 private:
  // Layer j's pre-activation bounds and relaxation, [B, padded(n_j)] each (j = 1..L).
  struct LayerState {
    Scratch lo, hi, lower_d, upper_d, upper_b;
  };

  [[nodiscard]] int64_t width(int j) const { return layers_[size_t(j)].in; }  // ReLU j's
  void interval_step(const Dense& d, const T* lo, const T* hi, int64_t ld, bool relu, int64_t B,
                     T* out_lo, T* out_hi);
  void interval_of(const Dense& d, const T* c, const T* r, int64_t P, int64_t B, T* out_lo,
                   T* out_hi);
  void relax(int j, int64_t B);
  void start_rows(const Dense& d, int64_t count, const int64_t* neuron, T* A, T* bias) const;
  void pull_to_input(int j, int64_t rows, int64_t lower_rows, const int64_t* box_of, T* A, T* bias);
  void bound_layer(int k, int64_t B, const T* centre, const T* radius);

  std::vector<Dense> layers_;  // layers_[j]: relu(z_j) -> z_{j+1} (z_0 = x); layers_[L]: -> y
  Dense spec_;                 // C·layers_[L]: relu(z_L) -> C·y
  at::Tensor C_;               // [K, m]
  at::ScalarType dtype_;
  int L_;  // ReLU layers
  int64_t widest_ = kMinColumns;
  std::vector<LayerState> state_;  // index j = 1..L
  Scratch centre_, radius_, mid_, rad_, A_, A2_, bias_;
  std::vector<int64_t> box_of_, neuron_;  // per row of a pass
};

// out = interval of d over [lo, hi] ([B, *] with leading dimension ld; ReLU'd first when `relu`)
// by centre and radius, as AffineOp::ibp: [B, padded(d.out)].
template <class T>
void ChainPlanOf<T>::interval_step(const Dense& d, const T* lo, const T* hi, int64_t ld, bool relu,
                                   int64_t B, T* out_lo, T* out_hi) {
  const int64_t P = padded(d.in);
  T* c = centre_.at_least<T>(B * P, dtype_);
  T* r = radius_.at_least<T>(B * P, dtype_);
  centre_and_radius(lo, hi, ld, d.in, B, relu, c, r, P);
  interval_of(d, c, r, P, B, out_lo, out_hi);
}

// out = d's interval over boxes of centre c and radius r ([B, P]): W·c + b ± |W|·r,
// [B, padded(d.out)].
template <class T>
void ChainPlanOf<T>::interval_of(const Dense& d, const T* c, const T* r, int64_t P, int64_t B,
                                 T* out_lo, T* out_hi) {
  const int64_t Q = padded(d.out);
  times_by_rows<T>(B, Q, d.in, c, P, d.wt.data_ptr<T>(), out_lo);
  times_by_rows<T>(B, Q, d.in, r, P, d.wt_abs.data_ptr<T>(), out_hi);
  flops_ += 4 * B * d.in * d.out;
  const T* bias = d.b.data_ptr<T>();
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t i = 0; i < d.out; ++i) {
      const T mid = out_lo[b * Q + i] + bias[i];
      const T rad = out_hi[b * Q + i];
      out_lo[b * Q + i] = mid - rad;
      out_hi[b * Q + i] = mid + rad;
    }
  }
}

template <class T>
void ChainPlanOf<T>::relax(int j, int64_t B) {
  LayerState& s = state_[size_t(j)];
  const int64_t P = padded(width(j));
  const T* lo = s.lo.template at_least<T>(B * P, dtype_);
  const T* hi = s.hi.template at_least<T>(B * P, dtype_);
  T* ld = s.lower_d.template at_least<T>(B * P, dtype_);
  T* ud = s.upper_d.template at_least<T>(B * P, dtype_);
  T* ub = s.upper_b.template at_least<T>(B * P, dtype_);
  for (int64_t e = 0; e < B * P; ++e) {
    const T lb_r = std::min(lo[e], T(0));
    const T ub_r = std::max(std::max(hi[e], T(0)), lb_r + T(1e-8));
    ud[e] = ub_r / (ub_r - lb_r);
    ub[e] = -lb_r * ud[e];
    ld[e] = ud[e] > T(0.5) ? T(1) : T(0);
  }
}

// Rows `neuron[0..count)` of d as the A of passes (over d's input) and their bias.
template <class T>
void ChainPlanOf<T>::start_rows(const Dense& d, int64_t count, const int64_t* neuron, T* A,
                                T* bias) const {
  const int64_t P = padded(d.in);
  const T* w = d.w.data_ptr<T>();
  const T* b = d.b.data_ptr<T>();
  for (int64_t r = 0; r < count; ++r) {
    std::copy_n(w + neuron[r] * P, P, A + r * P);
    bias[r] = b[neuron[r]];
  }
}

// Rows of A over relu(z_j) ([rows, padded(n_j)]) pulled back to the input x, through ReLU j,
// layers_[j − 1], ..., ReLU 1, layers_[0]: rows below lower_rows take the relaxation of a lower
// bound, the others of an upper one (ops/relu.cpp relax_side). A ends [rows, padded(n_0)].
template <class T>
void ChainPlanOf<T>::pull_to_input(int j, int64_t rows, int64_t lower_rows, const int64_t* box_of,
                                   T* A, T* bias) {
  T* A2 = A2_.at_least<T>(rows * widest_, dtype_);
  for (; j >= 1; --j) {
    const Dense& d = layers_[size_t(j - 1)];  // relu(z_{j-1}) -> z_j
    const int64_t n = width(j);
    const int64_t P = padded(n);
    const LayerState& s = state_[size_t(j)];
    const T* ld = s.lower_d.template data<T>();
    const T* ud = s.upper_d.template data<T>();
    const T* ub = s.upper_b.template data<T>();
    const T* db = d.b.data_ptr<T>();
    // The lower bound takes the lower line where A > 0 and the upper where A < 0 (its intercept
    // into the bias); the upper bound the other way round.
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t off = box_of[r] * P;
      const T added =
          r < lower_rows
              ? relax_row<T, false>(A + r * P, ld + off, ud + off, ub + off, db, A2 + r * P, P)
              : relax_row<T, true>(A + r * P, ud + off, ld + off, ub + off, db, A2 + r * P, P);
      bias[r] = bias[r] + added;
    }
    gemm_rows<T>(rows, padded(d.in), n, A2, P, d.w.data_ptr<T>(), padded(d.in), A, padded(d.in));
    flops_ += 2 * rows * n * d.in;
  }
}

// z_k's bounds ([B, padded(n_k)] in state_[k]): IBP from z_{k−1}'s (exact for k = 1, from the
// box), then CROWN for each box's neurons IBP leaves unstable, intersected with IBP.
template <class T>
void ChainPlanOf<T>::bound_layer(int k, int64_t B, const T* centre, const T* radius) {
  const Dense& d = layers_[size_t(k - 1)];
  const int64_t n = d.out;
  const int64_t Q = padded(n);
  LayerState& s = state_[size_t(k)];
  T* lo = s.lo.template at_least<T>(B * Q, dtype_);
  T* hi = s.hi.template at_least<T>(B * Q, dtype_);
  if (k == 1) {
    // Centre and radius of the box ([B, padded(n_0)]) are given.
    interval_of(d, centre, radius, padded(d.in), B, lo, hi);
    return;
  }
  const LayerState& prev = state_[size_t(k - 1)];
  const int64_t Pp = padded(width(k - 1));
  interval_step(d, prev.lo.template data<T>(), prev.hi.template data<T>(), Pp, true, B, lo, hi);
  box_of_.clear();
  neuron_.clear();
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t i = 0; i < n; ++i) {
      if (lo[b * Q + i] < 0 && hi[b * Q + i] > 0) {
        box_of_.push_back(b);
        neuron_.push_back(i);
      }
    }
  }
  const auto rows = int64_t(box_of_.size());
  if (rows == 0) return;
  // Both sides: rows [0, rows) the lower bounds, [rows, 2·rows) the upper ones.
  box_of_.insert(box_of_.end(), box_of_.begin(), box_of_.end());
  T* A = A_.at_least<T>(2 * rows * widest_, dtype_);
  T* bias = bias_.at_least<T>(2 * rows, dtype_);
  start_rows(d, rows, neuron_.data(), A, bias);
  start_rows(d, rows, neuron_.data(), A + rows * padded(d.in), bias + rows);
  pull_to_input(k - 1, 2 * rows, rows, box_of_.data(), A, bias);
  const int64_t n0 = layers_.front().in;
  const int64_t P0 = padded(n0);
  for (int64_t r = 0; r < 2 * rows; ++r) {
    const int64_t b = box_of_[size_t(r)];
    const auto [dot_c, dot_r] =
        centre_radius_dots(A + r * P0, centre + b * P0, radius + b * P0, P0);
    const int64_t e = b * Q + neuron_[size_t(r % rows)];
    if (r < rows) {
      const T v = (dot_c - dot_r) + bias[r];
      if (std::isfinite(v)) lo[e] = std::max(lo[e], v);
    } else {
      const T v = (dot_c + dot_r) + bias[r];
      if (std::isfinite(v)) hi[e] = std::min(hi[e], v);
    }
  }
}

template <class T>
ChainBounds ChainPlanOf<T>::bound(const InputBox& box, const Checkpoint& checkpoint) {
  const int64_t B = box.lower.size(0);
  if (B > kBoxesPerPass) {
    // In pieces whose rows stay in cache: a box's bits do not depend on its batch.
    std::vector<at::Tensor> crown, ibp, coeffs;
    for (int64_t s = 0; s < B; s += kBoxesPerPass) {
      const int64_t e = std::min(B, s + kBoxesPerPass);
      ChainBounds part = bound({box.lower.slice(0, s, e), box.upper.slice(0, s, e)}, checkpoint);
      crown.push_back(std::move(part.crown_lower));
      ibp.push_back(std::move(part.ibp_lower));
      coeffs.push_back(std::move(part.input_A));
    }
    return {at::cat(crown), at::cat(ibp), at::cat(coeffs)};
  }
  const at::Tensor x_lo = box.lower.reshape({B, -1}).to(dtype_).contiguous();
  const at::Tensor x_hi = box.upper.reshape({B, -1}).to(dtype_).contiguous();
  const int64_t n0 = layers_.front().in;
  const int64_t P0 = padded(n0);
  // The box's centre and radius, [B, padded(n_0)] (zeros past n_0, which the dot products
  // read), kept for every pass's concretisation.
  at::Tensor centre_t = at::zeros({B, P0}, x_lo.options());
  at::Tensor radius_t = at::zeros({B, P0}, x_lo.options());
  T* centre = centre_t.data_ptr<T>();
  T* radius = radius_t.data_ptr<T>();
  centre_and_radius(x_lo.data_ptr<T>(), x_hi.data_ptr<T>(), n0, n0, B, false, centre, radius, P0);
  for (int k = 1; k <= L_; ++k) {
    checkpoint();
    bound_layer(k, B, centre, radius);
    relax(k, B);
  }
  checkpoint();
  // The spec rows, lower side only: rows (b, q) at b·K + q.
  const int64_t K = spec_.out;
  const int64_t rows = B * K;
  box_of_.resize(size_t(rows));
  neuron_.resize(size_t(rows));
  for (int64_t r = 0; r < rows; ++r) {
    box_of_[size_t(r)] = r / K;
    neuron_[size_t(r)] = r % K;
  }
  T* A = A_.at_least<T>(rows * widest_, dtype_);
  T* bias = bias_.at_least<T>(rows, dtype_);
  start_rows(spec_, rows, neuron_.data(), A, bias);
  pull_to_input(L_, rows, rows, box_of_.data(), A, bias);
  ChainBounds out;
  out.crown_lower = at::empty({B, K}, x_lo.options());
  out.input_A = at::empty({B, K, n0}, x_lo.options());
  T* lower = out.crown_lower.data_ptr<T>();
  T* coeffs = out.input_A.data_ptr<T>();
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t b = r / K;
    const T* a = A + r * P0;
    const auto [dot_c, dot_r] = centre_radius_dots(a, centre + b * P0, radius + b * P0, P0);
    lower[r] = (dot_c - dot_r) + bias[r];
    std::copy_n(a, n0, coeffs + r * n0);
  }
  // IBP of the spec rows (ibp.cpp apply_spec): y's interval, then C by the signs of its entries.
  const Dense& last = layers_.back();
  const int64_t m = last.out;
  const int64_t Q = padded(m);
  T* y_lo = mid_.at_least<T>(B * Q, dtype_);
  T* y_hi = rad_.at_least<T>(B * Q, dtype_);
  if (L_ == 0) {
    interval_of(last, centre, radius, P0, B, y_lo, y_hi);
  } else {
    const LayerState& s = state_[size_t(L_)];
    interval_step(last, s.lo.template data<T>(), s.hi.template data<T>(), padded(width(L_)), true,
                  B, y_lo, y_hi);
  }
  out.ibp_lower = at::empty({B, K}, x_lo.options());
  T* ibp = out.ibp_lower.data_ptr<T>();
  const T* c = C_.data_ptr<T>();
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t q = 0; q < K; ++q) {
      T from_lo = 0;
      T from_hi = 0;
      for (int64_t i = 0; i < m; ++i) {
        const T w = c[q * m + i];
        from_lo += std::max(w, T(0)) * y_lo[b * Q + i];
        from_hi += std::min(w, T(0)) * y_hi[b * Q + i];
      }
      ibp[b * K + q] = from_lo + from_hi;
    }
  }
  return out;
}

}  // namespace

std::unique_ptr<PlannedChain> PlannedChain::plan(const BoundGraph& g, const at::Tensor& C,
                                                 const BoundOptions& options, std::string& why) {
  if (options.scheme != IntermediateScheme::kTightUnstable) {
    why = "the planned pass computes the tight_unstable scheme only";
    return nullptr;
  }
  if (why = planned::planned_refusal(g); !why.empty()) return nullptr;
  std::optional<planned::ComposedChain> chain = planned::compose_chain(g, C, why);
  if (!chain) return nullptr;
  std::vector<Dense> layers = std::move(chain->layers);
  Dense spec = std::move(chain->spec);
  const auto options_of = at::TensorOptions().dtype(g.dtype());
  const at::Tensor Cd = C.to(options_of).contiguous();
  if (g.dtype() == at::kFloat) {
    return std::make_unique<ChainPlanOf<float>>(std::move(layers), std::move(spec), Cd);
  }
  return std::make_unique<ChainPlanOf<double>>(std::move(layers), std::move(spec), Cd);
}

}  // namespace distcrown
