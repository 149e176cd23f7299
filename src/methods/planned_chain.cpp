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

#include "distcrown/graph/param.hpp"

// The BLAS LibTorch's CPU library carries and exports (MKL on x86-64, OpenBLAS on arm64) by its
// Fortran names; ATen's own cpublas::gemm is not exported. LP64 integers.
extern "C" {
void sgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k,
            const float* alpha, const float* a, const int* lda, const float* b, const int* ldb,
            const float* beta, float* c, const int* ldc);
void dgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k,
            const double* alpha, const double* a, const int* lda, const double* b, const int* ldb,
            const double* beta, double* c, const int* ldc);
}

namespace distcrown {
namespace {

// Products at least this many columns wide round each row independently of the others
// (ops::kRowIndependentMinColumns): every matrix a product writes is padded to it with zeros.
constexpr int64_t kMinColumns = 16;
// The loops over a row take kLanes elements at a time, as 16-byte vectors (GCC/Clang vector
// extensions: SSE2 on any x86-64, NEON on arm64), each with its own partial sums, since one
// running sum would chain every addition on the last. Rows are padded to a multiple of kLanes
// too, with zeros in A and finite values in the relaxations.
constexpr int64_t kLanes = 8;
// Boxes bounded in one pass: a pass's rows (up to 2·width per box and layer) then stay in the
// caches; a larger batch is bounded in pieces of this many.
constexpr int64_t kBoxesPerPass = 32;

int64_t padded(int64_t n) { return std::max(kMinColumns, (n + kLanes - 1) / kLanes * kLanes); }

template <class T>
struct VecOf {
  typedef T type __attribute__((vector_size(16)));  // NOLINT(modernize-use-using)
};
template <class T>
using Vec = typename VecOf<T>::type;
template <class T>
constexpr int64_t kVecLanes = 16 / int64_t(sizeof(T));
template <class T>
constexpr int64_t kVecs = kLanes / kVecLanes<T>;  // vectors per kLanes elements

// Vectors travel by reference: by value their ABI depends on the target's SIMD (-Wpsabi).
template <class T>
const Vec<T>& load(const T* p, Vec<T>& v) {
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
template <class T>
void store(T* p, const Vec<T>& v) {
  __builtin_memcpy(p, &v, sizeof v);
}
// The sum of kVecs vectors' lanes.
template <class T>
T total(const Vec<T> (&parts)[kVecs<T>]) {
  Vec<T> sum = parts[0];
  for (int64_t u = 1; u < kVecs<T>; ++u) sum += parts[u];
  T t = sum[0];
  for (int64_t l = 1; l < kVecLanes<T>; ++l) t += sum[l];
  return t;
}

// Σ a_i·x_i and Σ |a_i|·r_i over P (a multiple of kLanes) elements.
template <class T>
std::pair<T, T> centre_radius_dots(const T* a, const T* x, const T* r, int64_t P) {
  constexpr int64_t V = kVecs<T>;
  constexpr int64_t W = kVecLanes<T>;
  Vec<T> dc[V] = {};
  Vec<T> dr[V] = {};
  const Vec<T> zero{};
  Vec<T> v;
  Vec<T> w;
  for (int64_t i = 0; i < P; i += kLanes) {
    for (int64_t u = 0; u < V; ++u) {
      load(a + i + u * W, v);
      dc[u] += v * load(x + i + u * W, w);
      dr[u] += (v < zero ? -v : v) * load(r + i + u * W, w);
    }
  }
  return {total<T>(dc), total<T>(dr)};
}

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

// Row-major out [M, Q] = x [M, K] (leading dimension ldx) · w [K, Q], Q a multiple of kLanes,
// row by row in a fixed order: a row's bits never depend on M (BLAS picks its kernel by shape,
// and for one row another one). The IBP products are this small.
template <class T>
void times_by_rows(int64_t M, int64_t Q, int64_t K, const T* x, int64_t ldx, const T* w, T* out) {
  constexpr int64_t W = kVecLanes<T>;
  Vec<T> acc;
  Vec<T> v;
  for (int64_t m = 0; m < M; ++m) {
    T* o = out + m * Q;
    std::fill_n(o, Q, T(0));
    for (int64_t k = 0; k < K; ++k) {
      const T s = x[m * ldx + k];
      const T* row = w + k * Q;
      for (int64_t q = 0; q < Q; q += W) {
        load(o + q, acc);
        acc += s * load(row + q, v);
        store(o + q, acc);
      }
    }
  }
}

// Row-major C [M, N] = A [M, K] · B [K, N] (leading dimensions lda, ldb, ldc), through BLAS's
// column-major gemm as Cᵀ = Bᵀ·Aᵀ.
template <class T>
void gemm_rows(int64_t M, int64_t N, int64_t K, const T* A, int64_t lda, const T* B, int64_t ldb,
               T* C, int64_t ldc) {
  if (M == 0) return;
  const char no = 'N';
  const auto m = int(N);
  const auto n = int(M);
  const auto k = int(K);
  const auto la = int(ldb);
  const auto lb = int(lda);
  const auto lc = int(ldc);
  const T one = 1;
  const T zero = 0;
  if constexpr (std::is_same_v<T, float>) {
    sgemm_(&no, &no, &m, &n, &k, &one, B, &la, A, &lb, &zero, C, &lc);
  } else {
    dgemm_(&no, &no, &m, &n, &k, &one, B, &la, A, &lb, &zero, C, &lc);
  }
}

// A scratch tensor that grows to the largest size asked for and is then reused (a tensor, so
// that the memory accountant sees it).
class Scratch {
 public:
  template <class T>
  T* at_least(int64_t n, at::ScalarType dtype) {
    if (!t_.defined() || t_.numel() < n)
      t_ = at::empty({std::max(n, t_.defined() ? 2 * t_.numel() : n)}, at::TensorOptions(dtype));
    return t_.data_ptr<T>();
  }
  /// What at_least() last gave.
  template <class T>
  [[nodiscard]] const T* data() const {
    return t_.data_ptr<T>();
  }

 private:
  at::Tensor t_;
};

// y = W x + b, stored for the two products a pass makes: A·W (backward) and x·Wᵀ (IBP).
struct Dense {
  int64_t out = 0;
  int64_t in = 0;
  at::Tensor w;       // [out, padded(in)]
  at::Tensor wt;      // [in, padded(out)]
  at::Tensor wt_abs;  // |W|ᵀ, as wt
  at::Tensor b;       // [padded(out)], zeros past out
};

Dense make_dense(const at::Tensor& W, const at::Tensor& b) {
  Dense d;
  d.out = W.size(0);
  d.in = W.size(1);
  d.w = at::zeros({d.out, padded(d.in)}, W.options());
  d.w.narrow(1, 0, d.in).copy_(W);
  d.wt = at::zeros({d.in, padded(d.out)}, W.options());
  d.wt.narrow(1, 0, d.out).copy_(W.t());
  d.wt_abs = d.wt.abs();
  d.b = at::zeros({padded(d.out)}, W.options());
  d.b.narrow(0, 0, d.out).copy_(b);
  return d;
}

// The nodes of a chain: runs[0] from the input to the first ReLU, runs[j] between ReLU j and
// ReLU j + 1, runs[L] from the last ReLU to the output; the node each run starts from (its
// input: node 0 or a ReLU) and ends at (the ReLU's input or the output; the start when empty).
struct Chain {
  std::vector<std::vector<int>> runs;
  std::vector<int> from;
  std::vector<int> to;
};

std::optional<Chain> find_chain(const BoundGraph& g, std::string& why) {
  Chain c;
  c.runs.emplace_back();
  c.from.push_back(0);
  int i = 0;
  while (i != g.output()) {
    const GraphNode& here = g.node(i);
    if (here.users.size() != 1) {
      why = "node '" + here.name + "' feeds " + std::to_string(here.users.size()) + " nodes";
      return std::nullopt;
    }
    const int next = here.users.front();
    const GraphNode& node = g.node(next);
    const OpTraits t = node.op->traits();
    if (node.inputs.size() != 1) {
      why = "node '" + node.name + "' has " + std::to_string(node.inputs.size()) + " inputs";
      return std::nullopt;
    }
    if (node.op->op_type() == "Relu") {
      c.to.push_back(i);
      c.runs.emplace_back();
      c.from.push_back(next);
    } else if (t.affine && !t.needs_input_bounds && !t.needs_centre_values) {
      c.runs.back().push_back(next);
    } else {
      why = "node '" + node.name + "' (" + node.op->op_type() + ") is neither affine nor a ReLU";
      return std::nullopt;
    }
    i = next;
  }
  c.to.push_back(g.output());
  return c;
}

// The rows [S, 1, *shape of `to`] pulled back through the run's nodes to the run's input:
// {A [S, n_in], bias [S]}. Affine nodes read no bounds.
std::pair<at::Tensor, at::Tensor> pull_back(const BoundGraph& g, const std::vector<int>& run,
                                            at::Tensor rows, int64_t n_in) {
  BiasPair bias;
  BoundA a{std::move(rows), {}};
  const int64_t S = a.lA.size(0);
  for (auto it = run.rbegin(); it != run.rend(); ++it) {
    const GraphNode& node = g.node(*it);
    const std::vector<const Interval*> none(node.inputs.size(), nullptr);
    a = node.op->backward(a, none, bias).at(0);
  }
  at::Tensor b =
      bias.lower.defined() ? bias.lower.reshape({S}).contiguous() : at::zeros({S}, a.lA.options());
  return {a.lA.reshape({S, n_in}).contiguous(), std::move(b)};
}

// Rows `weights` [S, n_out] on the output of `to` as the A of a pass ([S, 1, *shape]).
at::Tensor as_rows(const BoundGraph& g, int to, const at::Tensor& weights) {
  std::vector<int64_t> shape{weights.size(0)};
  const auto& s = g.node(to).shape;
  shape.insert(shape.end(), s.begin(), s.end());
  return weights.reshape(shape);
}

// c = (u + l) / 2 and r = (u − l) / 2 of B rows of n bounds l, u (leading dimension ld), ReLU'd
// first when `relu`, into c and r [B, P] (columns past n left as they are).
template <class T>
void centre_and_radius(const T* lo, const T* hi, int64_t ld, int64_t n, int64_t B, bool relu, T* c,
                       T* r, int64_t P) {
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t i = 0; i < n; ++i) {
      T l = lo[b * ld + i];
      T u = hi[b * ld + i];
      if (relu) {
        l = std::max(l, T(0));
        u = std::max(u, T(0));
      }
      c[b * P + i] = (u + l) / T(2);
      r[b * P + i] = (u - l) / T(2);
    }
  }
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

// Every parameter a plain tensor of this process (not an FSDP shard, which a plan would gather
// and keep whole).
bool parameters_local(const BoundGraph& g) {
  for (int i = 1; i < g.size(); ++i) {
    for (ParamPtr* p : g.node(i).op->params()) {
      if (*p && dynamic_cast<const LocalParam*>(p->get()) == nullptr) return false;
    }
  }
  return true;
}

}  // namespace

std::unique_ptr<PlannedChain> PlannedChain::plan(const BoundGraph& g, const at::Tensor& C,
                                                 const BoundOptions& options, std::string& why) {
  if (options.scheme != IntermediateScheme::kTightUnstable) {
    why = "the planned pass computes the tight_unstable scheme only";
    return nullptr;
  }
  if (!g.device().is_cpu()) {
    why = "the planned pass runs on the CPU";
    return nullptr;
  }
  if (g.dtype() != at::kFloat && g.dtype() != at::kDouble) {
    why = "the planned pass computes in float32 or float64";
    return nullptr;
  }
  if (g.tensor_parallel_group() || !parameters_local(g)) {
    why = "the planned pass needs every parameter whole in this process";
    return nullptr;
  }
  const std::optional<Chain> chain = find_chain(g, why);
  if (!chain) return nullptr;
  c10::NoGradGuard no_grad;
  const auto options_of = at::TensorOptions().dtype(g.dtype());
  std::vector<Dense> layers;
  Dense spec;
  for (size_t j = 0; j < chain->runs.size(); ++j) {
    const int64_t n_in = g.node_numel(chain->from[j]);
    const int64_t n_out = g.node_numel(chain->to[j]);
    const at::Tensor eye = at::eye(n_out, options_of);
    auto [W, b] = pull_back(g, chain->runs[j], as_rows(g, chain->to[j], eye), n_in);
    layers.push_back(make_dense(W, b));
    if (j + 1 == chain->runs.size()) {
      auto [WC, bC] =
          pull_back(g, chain->runs[j], as_rows(g, chain->to[j], C.to(options_of)), n_in);
      spec = make_dense(WC, bC);
    }
  }
  const at::Tensor Cd = C.to(options_of).contiguous();
  if (g.dtype() == at::kFloat) {
    return std::make_unique<ChainPlanOf<float>>(std::move(layers), std::move(spec), Cd);
  }
  return std::make_unique<ChainPlanOf<double>>(std::move(layers), std::move(spec), Cd);
}

}  // namespace distcrown
