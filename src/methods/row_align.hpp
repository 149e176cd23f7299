#pragma once
// Row alignment of backward passes (crown.cpp, crown_patches.cpp; docs/architecture.md "Row
// independence").
#include <ATen/ATen.h>

#include "distcrown/bounds/interval.hpp"

namespace distcrown {

// Every backward pass runs on a multiple of kRowAlign (bounds/interval.hpp) rows, padded by
// repeating a row: a row's bits must not depend on which other rows share its pass, so that
// chunking and spec-parallel splitting give the bits of one unchunked pass. 8 rows were enough
// on AVX2 machines; with this LibTorch's AVX-512 kernels the ViT's passes of 8 or 24 rows round
// differently from passes of 16, 32, 48 … rows (up to 3e-6 on its bounds; which kernel does it
// was not traced: its plain GEMMs do not), while every multiple of 16 agrees.

// Row ids [k] padded to a multiple of kRowAlign by repeating the last.
inline at::Tensor pad_rows(const at::Tensor& idx) {
  const int64_t k = idx.numel();
  const int64_t padded = (k + kRowAlign - 1) / kRowAlign * kRowAlign;
  if (padded == k) return idx;
  return at::cat({idx, idx[k - 1].expand({padded - k})});
}

}  // namespace distcrown
