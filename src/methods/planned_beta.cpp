#include "methods/planned_beta.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "distcrown/graph/param.hpp"
#include "distcrown/util/error.hpp"
#include "methods/planned_common.hpp"

namespace distcrown {
namespace {

using planned::centre_radius_dots;
using planned::Dense;
using planned::gemm_rows;
using planned::kLanes;
using planned::kVecLanes;
using planned::kVecs;
using planned::load;
using planned::padded;
using planned::Scratch;
using planned::store;
using planned::total;
using planned::Vec;

// Adam's constants (methods/adam.hpp: PyTorch's defaults).
constexpr double kBeta1 = 0.9;
constexpr double kBeta2 = 0.999;
constexpr double kEpsilon = 1e-8;

// One row through a ReLU step with split multipliers, and the bias of the affine map before it:
// o = pos·slope + neg·ud + β·s (pos = max(a, 0), neg = a − pos, slope = α where the neuron is
// unstable, else CROWN's 0/1); returns Σ neg·ub (the chord's intercepts the row takes) plus
// Σ o·bias. P a multiple of kLanes.
template <class T>
T relax_beta_row(const T* a, const T* alpha, const T* beta, const T* unst, const T* ld, const T* ud,
                 const T* ub, const T* s, const T* bias, T* o, int64_t P) {
  constexpr int64_t V = kVecs<T>;
  constexpr int64_t W = kVecLanes<T>;
  Vec<T> taken[V] = {};
  Vec<T> through[V] = {};
  const Vec<T> zero{};
  const Vec<T> half = zero + T(0.5);
  Vec<T> v;
  Vec<T> w1;
  Vec<T> w2;
  Vec<T> w3;
  for (int64_t i = 0; i < P; i += kLanes) {
    for (int64_t u = 0; u < V; ++u) {
      const int64_t at = i + u * W;
      load(a + at, v);
      const Vec<T> pos = v > zero ? v : zero;
      const Vec<T> neg = v - pos;
      const Vec<T> slope = load(unst + at, w1) > half ? load(alpha + at, w2) : load(ld + at, w3);
      taken[u] += neg * load(ub + at, w1);
      Vec<T> out = pos * slope + neg * load(ud + at, w2);
      out += load(beta + at, w1) * load(s + at, w3);
      store(o + at, out);
      through[u] += out * load(bias + at, w1);
    }
  }
  return total<T>(taken) + total<T>(through);
}

// A row's parameters at one ReLU step and their Adam moments (at its parameter row), and its
// domain's relaxation there (unstable marks, lower and upper slopes, upper intercepts, split
// signs): [P] each.
template <class T>
struct StepRow {
  T* alpha;
  T* m_alpha;
  T* v_alpha;
  T* beta;
  T* m_beta;
  T* v_beta;
  const T* unst;
  const T* ld;
  const T* ud;
  const T* ub;
  const T* sign;
};

// One Adam step (methods/adam.cpp's arithmetic) of a vector of parameters p with moments at
// m_at, v_at and gradient g of the loss, `step` = −lr / bc1: the stepped parameters in every
// lane, the moments stored only where `moves`.
template <class T, class Mask>
Vec<T> adam_lanes(const Mask& moves, const Vec<T>& p, T* m_at, T* v_at, const Vec<T>& g, T step,
                  T bc2) {
  Vec<T> m;
  Vec<T> v;
  load(m_at, m);
  load(v_at, v);
  const Vec<T> next_m = m * T(kBeta1) + g * T(1 - kBeta1);
  const Vec<T> next_v = v * T(kBeta2) + g * g * T(1 - kBeta2);
  Vec<T> root = next_v / bc2;
  for (int64_t l = 0; l < kVecLanes<T>; ++l) root[l] = std::sqrt(root[l]);
  store(m_at, moves ? next_m : m);
  store(v_at, moves ? next_v : v);
  return p + step * (next_m / (root + T(kEpsilon)));
}

// A row's step back through a ReLU step, from h = H + bias (the gradient of its bound with
// respect to o) and the pass's coefficients a: with kGradient, into g the gradient with respect to
// the step's input, h·slope where a >= 0, h·ud + ub where a < 0 (autograd's convention at a = 0:
// pos takes it), with the pass's α; then Adam on α where the neuron is unstable (gradient
// −h·pos) and on β where it is split (−h·s). Every lane is computed and kept only where its entry
// moves (a dropped lane's value, even inf or NaN, is never stored). P a multiple of kLanes;
// `step_*` = −lr / bc1.
template <class T, bool kGradient>
void step_row(const T* H, const T* bias, const T* a, const StepRow<T>& p, T* g, T step_a, T step_b,
              T bc2, int64_t P) {
  constexpr int64_t W = kVecLanes<T>;
  const Vec<T> zero{};
  const Vec<T> one = zero + T(1);
  const Vec<T> half = zero + T(0.5);
  Vec<T> w1;
  Vec<T> w2;
  Vec<T> w3;
  for (int64_t at = 0; at < P; at += W) {
    const Vec<T> h = load(H + at, w1) + load(bias + at, w2);
    Vec<T> coef;
    load(a + at, coef);
    Vec<T> alpha;
    load(p.alpha + at, alpha);
    const auto unstable = load(p.unst + at, w1) > half;
    if constexpr (kGradient) {
      const Vec<T> slope = unstable ? alpha : load(p.ld + at, w3);
      const Vec<T> neg_side = h * load(p.ud + at, w1) + load(p.ub + at, w2);
      store(g + at, coef >= zero ? h * slope : neg_side);
    }
    const Vec<T> pos = coef < zero ? zero : coef;  // std::max(a, 0)
    Vec<T> next_a =
        adam_lanes(unstable, alpha, p.m_alpha + at, p.v_alpha + at, -h * pos, step_a, bc2);
    next_a = next_a < zero ? zero : (one < next_a ? one : next_a);  // std::clamp(·, 0, 1)
    store(p.alpha + at, unstable ? next_a : alpha);
    Vec<T> sign;
    load(p.sign + at, sign);
    Vec<T> beta;
    load(p.beta + at, beta);
    const auto split = sign != zero;
    Vec<T> next_b = adam_lanes(split, beta, p.m_beta + at, p.v_beta + at, -h * sign, step_b, bc2);
    next_b = next_b < zero ? zero : next_b;  // std::max(·, 0)
    next_b = split ? next_b : beta;
    store(p.beta + at, next_b);
  }
}

template <class T>
class BetaPlanOf final : public PlannedBeta {
 public:
  BetaPlanOf(std::vector<Dense> layers, Dense spec, at::Tensor centre, at::Tensor radius)
      : layers_(std::move(layers)),
        spec_(std::move(spec)),
        centre_(std::move(centre)),
        radius_(std::move(radius)),
        dtype_(centre_.scalar_type()),
        L_(int(layers_.size()) - 1),
        K_(spec_.out),
        layer_(size_t(L_ + 1)) {}

  void load(const SplitBatchView& batch, bool optimise) override;
  at::Tensor pass(const std::vector<int64_t>& active, bool record) override;
  void step(double lr_alpha, double lr_beta) override;
  void alpha_beta(std::vector<at::Tensor>& alpha, std::vector<at::Tensor>& beta) const override;
  [[nodiscard]] at::Tensor relu_A(size_t j) const override { return relu_A_.at(j); }
  [[nodiscard]] at::Tensor input_A() const override { return input_A_; }
  [[nodiscard]] bool movable() const override {
    return std::any_of(layer_.begin() + 1, layer_.end(), [](const Layer& s) {
      return std::any_of(s.moving.begin(), s.moving.end(), [](int64_t n) { return n > 0; });
    });
  }

 private:
  // ReLU j's relaxation per domain [B, P_j] and its parameters per row [K·B, P_j] (row k·B + b),
  // zeros past n_j; `saved` the last pass's coefficients at ReLU j's output [rows, P_j] (j = 0:
  // at the input).
  struct Layer {
    Scratch unstable, lower_d, upper_d, upper_b, sign;
    Scratch alpha, beta, m_alpha, v_alpha, m_beta, v_beta;
    Scratch saved;
    std::vector<int64_t> moving;  // per domain, its unstable and split neurons (when optimised)
  };

  [[nodiscard]] int64_t width(int j) const { return layers_[size_t(j)].in; }  // n_j (n_0: input)
  void load_layer(int j, const SplitBatchView& batch, bool optimise);
  void record_rows();

  std::vector<Dense> layers_;   // layers_[j]: relu(z_j) -> z_{j+1} (z_0 = x); layers_[L]: -> y
  Dense spec_;                  // C·layers_[L]: relu(z_L) -> C·y
  at::Tensor centre_, radius_;  // of the box, [padded(n_0)], zeros past n_0
  at::ScalarType dtype_;
  int L_;      // ReLU layers
  int64_t K_;  // spec rows
  int64_t B_ = 0;
  std::vector<Layer> layer_;  // index j = 1..L; layer_[0].saved: at the input
  Scratch work_, grad_, grad_next_, bias_;
  std::vector<int64_t> active_;  // the last pass's domains
  int64_t steps_ = 0;
  bool optimise_ = false;  // the loaded batch may be stepped
  std::vector<at::Tensor> relu_A_;
  at::Tensor input_A_;
};

template <class T>
void BetaPlanOf<T>::load_layer(int j, const SplitBatchView& batch, bool optimise) {
  const int64_t n = width(j);
  const int64_t P = padded(n);
  const int64_t B = B_;
  Layer& s = layer_[size_t(j)];
  const auto flat = [&](const at::Tensor& t, int64_t rows, const char* what) {
    if (t.numel() != rows * n) throw Error(std::string("internal: planned β pass: ") + what);
    return t.to(dtype_).contiguous().reshape({rows, n});
  };
  const at::Tensor lo_t = flat((*batch.lower)[size_t(j - 1)], B, "bounds");
  const at::Tensor hi_t = flat((*batch.upper)[size_t(j - 1)], B, "bounds");
  const at::Tensor split_t = flat((*batch.split)[size_t(j - 1)], B, "split marks");
  const at::Tensor alpha_t = flat((*batch.alpha)[size_t(j - 1)], K_ * B, "alpha");
  const at::Tensor beta_t = flat((*batch.beta)[size_t(j - 1)], K_ * B, "beta");
  const T* lo = lo_t.data_ptr<T>();
  const T* hi = hi_t.data_ptr<T>();
  const T* sp = split_t.data_ptr<T>();
  T* unst = s.unstable.template at_least<T>(B * P, dtype_);
  T* ld = s.lower_d.template at_least<T>(B * P, dtype_);
  T* ud = s.upper_d.template at_least<T>(B * P, dtype_);
  T* ub = s.upper_b.template at_least<T>(B * P, dtype_);
  T* sign = s.sign.template at_least<T>(B * P, dtype_);
  for (int64_t b = 0; b < B; ++b) {
    // ops/relu.cpp relu_relaxation, element by element (a loop the compiler vectorises).
    const T* l = lo + b * n;
    const T* u = hi + b * n;
    const int64_t o = b * P;
    for (int64_t i = 0; i < n; ++i) {
      const T lb_r = std::min(l[i], T(0));
      const T ub_r = std::max(std::max(u[i], T(0)), lb_r + T(1e-8));
      const T d = ub_r / (ub_r - lb_r);
      ud[o + i] = d;
      ub[o + i] = -lb_r * d;
      ld[o + i] = d > T(0.5) ? T(1) : T(0);
      unst[o + i] = l[i] < 0 && u[i] > 0 ? T(1) : T(0);
      sign[o + i] = sp[b * n + i];
    }
    for (T* t : {unst, ld, ud, ub, sign}) std::fill(t + o + n, t + o + P, T(0));
  }
  s.moving.assign(size_t(B), 0);
  if (optimise) {
    for (int64_t b = 0; b < B; ++b) {
      s.moving[size_t(b)] =
          std::count_if(unst + b * P, unst + b * P + n, [](T u) { return u != 0; }) +
          std::count_if(sign + b * P, sign + b * P + n, [](T v) { return v != 0; });
    }
  }
  const int64_t rows = K_ * B;
  T* alpha = s.alpha.template at_least<T>(rows * P, dtype_);
  T* beta = s.beta.template at_least<T>(rows * P, dtype_);
  const T* a_in = alpha_t.data_ptr<T>();
  const T* b_in = beta_t.data_ptr<T>();
  for (int64_t r = 0; r < rows; ++r) {
    std::copy_n(a_in + r * n, n, alpha + r * P);
    std::fill(alpha + r * P + n, alpha + (r + 1) * P, T(0));
    std::copy_n(b_in + r * n, n, beta + r * P);
    std::fill(beta + r * P + n, beta + (r + 1) * P, T(0));
  }
  if (!optimise) return;
  for (Scratch* m : {&s.m_alpha, &s.v_alpha, &s.m_beta, &s.v_beta}) {
    std::fill_n(m->template at_least<T>(rows * P, dtype_), rows * P, T(0));
  }
}

template <class T>
void BetaPlanOf<T>::load(const SplitBatchView& batch, bool optimise) {
  if (batch.lower->size() != size_t(L_)) throw Error("internal: planned β pass: ReLU count");
  B_ = batch.B;
  if (L_ > 0 && (*batch.alpha)[0].size(0) != K_) throw Error("internal: planned β pass: rows");
  for (int j = 1; j <= L_; ++j) load_layer(j, batch, optimise);
  steps_ = 0;
  optimise_ = optimise;
  active_.clear();
}

template <class T>
at::Tensor BetaPlanOf<T>::pass(const std::vector<int64_t>& active, bool record) {
  active_ = active;
  const auto nA = int64_t(active.size());
  const int64_t rows = K_ * nA;
  // Rows (k, a) at k·nA + a: the spec rows over relu(z_L), then ReLU by ReLU to the input.
  const int64_t PL = padded(spec_.in);
  T* S = layer_[size_t(L_)].saved.template at_least<T>(rows * PL, dtype_);
  T* bias = bias_.at_least<T>(rows, dtype_);
  for (int64_t r = 0; r < rows; ++r) {
    std::copy_n(spec_.w.data_ptr<T>() + (r / std::max<int64_t>(nA, 1)) * PL, PL, S + r * PL);
    bias[r] = spec_.b.data_ptr<T>()[r / std::max<int64_t>(nA, 1)];
  }
  int64_t widest = PL;
  for (const Dense& d : layers_) widest = std::max(widest, padded(d.in));
  T* X = work_.at_least<T>(rows * widest, dtype_);
  for (int j = L_; j >= 1; --j) {
    Layer& s = layer_[size_t(j)];
    const Dense& d = layers_[size_t(j - 1)];  // relu(z_{j-1}) -> z_j
    const int64_t n = width(j);
    const int64_t P = padded(n);
    const int64_t Pin = padded(d.in);
    const T* A = s.saved.template data<T>();
    const T* alpha = s.alpha.template data<T>();
    const T* beta = s.beta.template data<T>();
    const T* unst = s.unstable.template data<T>();
    const T* ld = s.lower_d.template data<T>();
    const T* ud = s.upper_d.template data<T>();
    const T* ub = s.upper_b.template data<T>();
    const T* sign = s.sign.template data<T>();
    const T* db = d.b.data_ptr<T>();
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t dom = active[size_t(r % nA)];
      const int64_t pr = (r / nA) * B_ + dom;
      bias[r] +=
          relax_beta_row<T>(A + r * P, alpha + pr * P, beta + pr * P, unst + dom * P, ld + dom * P,
                            ud + dom * P, ub + dom * P, sign + dom * P, db, X + r * P, P);
    }
    T* below = layer_[size_t(j - 1)].saved.template at_least<T>(rows * Pin, dtype_);
    gemm_rows<T>(rows, Pin, n, X, P, d.w.data_ptr<T>(), Pin, below, Pin);
    flops_ += 2 * rows * n * d.in;
  }
  const int64_t P0 = padded(width(0));
  const T* A0 = layer_[0].saved.template data<T>();
  at::Tensor out = at::empty({nA, K_}, at::TensorOptions().dtype(dtype_));
  T* lb = out.data_ptr<T>();
  const T* c = centre_.data_ptr<T>();
  const T* rad = radius_.data_ptr<T>();
  for (int64_t r = 0; r < rows; ++r) {
    const auto [dot_c, dot_r] = centre_radius_dots(A0 + r * P0, c, rad, P0);
    lb[(r % nA) * K_ + r / nA] = (dot_c - dot_r) + bias[r];
  }
  if (record) record_rows();
  return out;
}

// The last pass's coefficients as tensors [K, B, n_j] (relu_A_) and [K, B, n_0] (input_A_),
// zeros for the domains it did not bound.
template <class T>
void BetaPlanOf<T>::record_rows() {
  const auto nA = int64_t(active_.size());
  const auto copy_out = [&](int j) {
    const int64_t n = width(j);
    const int64_t P = padded(n);
    at::Tensor t = at::zeros({K_, B_, n}, at::TensorOptions().dtype(dtype_));
    T* o = t.data_ptr<T>();
    const T* A = layer_[size_t(j)].saved.template data<T>();
    for (int64_t r = 0; r < K_ * nA; ++r) {
      const int64_t pr = (r / nA) * B_ + active_[size_t(r % nA)];
      std::copy_n(A + r * P, n, o + pr * n);
    }
    return t;
  };
  relu_A_.assign(size_t(L_), at::Tensor());
  for (int j = 1; j <= L_; ++j) relu_A_[size_t(j - 1)] = copy_out(j);
  input_A_ = copy_out(0);
}

// The gradient of Σ lb over the last pass's rows, from the input up: at the input
// c − sign(A_0)·r; through layer j's product, H = G·W_{j−1}ᵀ; through ReLU j's step and its
// Adam update, step_row (each layer's α and β updated once its gradient is known: the layers
// below it do not read them).
template <class T>
void BetaPlanOf<T>::step(double lr_alpha, double lr_beta) {
  const auto nA = int64_t(active_.size());
  const int64_t rows = K_ * nA;
  if (rows == 0) return;
  if (!optimise_) throw Error("internal: planned β pass: a step on a batch loaded not to be");
  ++steps_;
  const double bc1 = 1 - std::pow(kBeta1, double(steps_));
  const auto bc2 = T(1 - std::pow(kBeta2, double(steps_)));
  const auto step_a = T(-lr_alpha / bc1);
  const auto step_b = T(-lr_beta / bc1);
  int64_t widest = padded(width(0));
  for (const Dense& d : layers_) widest = std::max(widest, padded(d.out));
  T* G = grad_.at_least<T>(rows * widest, dtype_);
  T* next = grad_next_.at_least<T>(rows * widest, dtype_);
  T* H = work_.at_least<T>(rows * widest, dtype_);
  const int64_t P0 = padded(width(0));
  const T* A0 = layer_[0].saved.template data<T>();
  const T* c = centre_.data_ptr<T>();
  const T* rad = radius_.data_ptr<T>();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < P0; ++i) {
      const T a = A0[r * P0 + i];
      const T sgn = a > 0 ? T(1) : (a < 0 ? T(-1) : T(0));
      G[r * P0 + i] = c[i] - sgn * rad[i];
    }
  }
  for (int j = 1; j <= L_; ++j) {
    Layer& s = layer_[size_t(j)];
    const Dense& d = layers_[size_t(j - 1)];  // relu(z_{j-1}) -> z_j
    const int64_t n = width(j);
    const int64_t P = padded(n);
    gemm_rows<T>(rows, P, d.in, G, padded(d.in), d.wt.data_ptr<T>(), P, H, P);
    flops_ += 2 * rows * n * d.in;
    const T* A = s.saved.template data<T>();
    const T* db = d.b.data_ptr<T>();
    const bool below_top = j < L_;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t dom = active_[size_t(r % nA)];
      const int64_t pr = (r / nA) * B_ + dom;
      T* g = below_top ? next + r * P : nullptr;
      if (g == nullptr && s.moving[size_t(dom)] == 0) continue;
      const auto row = [&](Scratch& t) { return t.template mutable_data<T>() + pr * P; };
      const auto of = [&](const Scratch& t) { return t.template data<T>() + dom * P; };
      const StepRow<T> p{row(s.alpha),  row(s.m_alpha), row(s.v_alpha), row(s.beta),
                         row(s.m_beta), row(s.v_beta),  of(s.unstable), of(s.lower_d),
                         of(s.upper_d), of(s.upper_b),  of(s.sign)};
      if (g != nullptr) {
        step_row<T, true>(H + r * P, db, A + r * P, p, g, step_a, step_b, bc2, P);
      } else {
        step_row<T, false>(H + r * P, db, A + r * P, p, g, step_a, step_b, bc2, P);
      }
    }
    std::swap(G, next);
  }
}

template <class T>
void BetaPlanOf<T>::alpha_beta(std::vector<at::Tensor>& alpha,
                               std::vector<at::Tensor>& beta) const {
  for (int j = 1; j <= L_; ++j) {
    const Layer& s = layer_[size_t(j)];
    const int64_t n = width(j);
    const int64_t P = padded(n);
    for (auto [out, from] : {std::pair{&alpha, &s.alpha}, std::pair{&beta, &s.beta}}) {
      at::Tensor& t = (*out)[size_t(j - 1)];
      if (!t.is_contiguous() || t.scalar_type() != dtype_ || t.numel() != K_ * B_ * n) {
        throw Error("internal: planned β pass: α/β tensors");
      }
      T* o = t.data_ptr<T>();
      const T* p = from->template data<T>();
      for (int64_t r = 0; r < K_ * B_; ++r) std::copy_n(p + r * P, n, o + r * n);
    }
  }
}

// Elements of the graph's own parameters.
int64_t parameter_elements(const BoundGraph& g) {
  int64_t own = 0;
  for (int i = 1; i < g.size(); ++i) {
    for (ParamPtr* p : g.node(i).op->params()) {
      if (*p) own += (*p)->numel();
    }
  }
  return own;
}

}  // namespace

std::unique_ptr<PlannedBeta> PlannedBeta::plan(const BoundGraph& g, const at::Tensor& C,
                                               const InputBox& box, std::string& why) {
  if (why = planned::planned_refusal(g); !why.empty()) return nullptr;
  // Convolutions made dense would cost more than they save: at most twice the parameters (the
  // spec's rows and a small network's slack aside).
  const int64_t most = 2 * parameter_elements(g) + (int64_t{1} << 16);
  std::optional<planned::ComposedChain> chain = planned::compose_chain(g, C, why, most);
  if (!chain) return nullptr;
  const at::Tensor lo = box.lower.reshape({-1}).to(g.dtype());
  const at::Tensor hi = box.upper.reshape({-1}).to(g.dtype());
  const int64_t n0 = lo.numel();
  if (n0 != chain->layers.front().in) throw Error("internal: planned β pass: the box's size");
  // As concretize (bounds/interval.cpp): centre and radius in the graph's dtype.
  at::Tensor centre = at::zeros({padded(n0)}, lo.options());
  at::Tensor radius = at::zeros({padded(n0)}, lo.options());
  centre.narrow(0, 0, n0).copy_((hi + lo) / 2);
  radius.narrow(0, 0, n0).copy_((hi - lo) / 2);
  std::unique_ptr<PlannedBeta> p;
  if (g.dtype() == at::kFloat) {
    p = std::make_unique<BetaPlanOf<float>>(std::move(chain->layers), std::move(chain->spec),
                                            centre, radius);
  } else {
    p = std::make_unique<BetaPlanOf<double>>(std::move(chain->layers), std::move(chain->spec),
                                             centre, radius);
  }
  p->relus_ = std::move(chain->relus);
  return p;
}

}  // namespace distcrown
