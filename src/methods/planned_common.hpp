#pragma once
// What the planned passes (planned_chain.cpp: input splitting's CROWN passes; planned_beta.cpp:
// ReLU splitting's α/β passes) share: a chain graph's affine runs composed into dense matrices,
// row-major products through LibTorch's BLAS, 16-byte vector loops, and scratch buffers that grow
// to the largest batch and are then reused. Internal to src/methods.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "distcrown/graph/bound_graph.hpp"

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

namespace distcrown::planned {

// Products at least this many columns wide round each row independently of the others
// (ops::kRowIndependentMinColumns): every matrix a product writes is padded to it with zeros.
constexpr int64_t kMinColumns = 16;
// The loops over a row take kLanes elements at a time, as 16-byte vectors (GCC/Clang vector
// extensions: SSE2 on any x86-64, NEON on arm64), each with its own partial sums, since one
// running sum would chain every addition on the last. Rows are padded to a multiple of kLanes
// too, with zeros in A and finite values in the relaxations.
constexpr int64_t kLanes = 8;

inline int64_t padded(int64_t n) {
  return std::max(kMinColumns, (n + kLanes - 1) / kLanes * kLanes);
}

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

// BLAS's column-major gemm, C = A·B with C [m, n].
template <class T>
void gemm_columns(int m, int n, int k, const T* A, int lda, const T* B, int ldb, T* C, int ldc) {
  const char no = 'N';
  const T one = 1;
  const T zero = 0;
  if constexpr (std::is_same_v<T, float>) {
    sgemm_(&no, &no, &m, &n, &k, &one, A, &lda, B, &ldb, &zero, C, &ldc);
  } else {
    dgemm_(&no, &no, &m, &n, &k, &one, A, &lda, B, &ldb, &zero, C, &ldc);
  }
}

// MKL computes rows in blocks of this many: a row of a last, partial block takes another kernel
// (other bits; measured at 1-3 rows in float32, every partial block in float64). Rows are
// therefore multiplied in whole blocks, a partial one zero-padded apart: a row's bits then depend
// neither on its position nor on the other rows (with products at least kMinColumns wide).
constexpr int64_t kRowBlock = 4;

// Row-major C [M, N] = A [M, K] · B [K, N] (leading dimensions lda, ldb, ldc), through BLAS's
// column-major gemm as Cᵀ = Bᵀ·Aᵀ, in whole blocks of kRowBlock rows.
template <class T>
void gemm_rows(int64_t M, int64_t N, int64_t K, const T* A, int64_t lda, const T* B, int64_t ldb,
               T* C, int64_t ldc) {
  const int64_t whole = M / kRowBlock * kRowBlock;
  if (whole > 0) {
    gemm_columns<T>(int(N), int(whole), int(K), B, int(ldb), A, int(lda), C, int(ldc));
  }
  const int64_t tail = M - whole;
  if (tail == 0) return;
  std::vector<T> a(size_t(kRowBlock * K), T(0));
  std::vector<T> c(size_t(kRowBlock * N));
  for (int64_t r = 0; r < tail; ++r) std::copy_n(A + (whole + r) * lda, K, a.data() + r * K);
  gemm_columns<T>(int(N), int(kRowBlock), int(K), B, int(ldb), a.data(), int(K), c.data(), int(N));
  for (int64_t r = 0; r < tail; ++r) std::copy_n(c.data() + r * N, N, C + (whole + r) * ldc);
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
  template <class T>
  [[nodiscard]] T* mutable_data() {
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

/// A dense copy of y = W x + b (W [out, in], b [out]).
Dense make_dense(const at::Tensor& W, const at::Tensor& b);

/// A graph's chain of runs of affine nodes between its ReLUs, composed: layers[j] maps
/// relu(z_j) to z_{j+1} (z_0 the input x; the last maps to the output y), `spec` the spec rows
/// C [K, m] times the last layer.
struct ComposedChain {
  std::vector<Dense> layers;
  Dense spec;
  std::vector<int> relus;  // the ReLU nodes, input to output
};

/// Why a planned pass cannot run g (empty when it can): not on the CPU, a dtype other than
/// float32/float64, sharded or tensor-parallel parameters.
std::string planned_refusal(const BoundGraph& g);

/// g composed with spec rows C, or nullopt with the reason in `why` where g is not a chain of
/// single-input affine nodes and ReLUs, or its composed matrices would hold more than
/// `max_elements` (checked before any is made).
std::optional<ComposedChain> compose_chain(
    const BoundGraph& g, const at::Tensor& C, std::string& why,
    int64_t max_elements = std::numeric_limits<int64_t>::max());

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

}  // namespace distcrown::planned
