#pragma once
// Vectorised helpers for packing K and V into panels.

#include "attnkit/core/index.hpp"
#include "attnkit/simd/batch.hpp"

namespace attnkit::simd {

/// dst[d * dst_stride + c] = row(c)[d] for c < rows, d < cols: rows of K become columns of a
/// K^T panel. Works in blocks of kWidth rows so that each destination line is filled by
/// consecutive stores while the source rows stay in L1.
template <class T, class RowPointer>
void transpose_rows(index_t rows, index_t cols, RowPointer&& row, T* dst, index_t dst_stride) {
  constexpr index_t kBlock = static_cast<index_t>(kWidth<T>);
  for (index_t c0 = 0; c0 < rows; c0 += kBlock) {
    const index_t block = rows - c0 < kBlock ? rows - c0 : kBlock;
    const T* sources[kBlock];
    for (index_t c = 0; c < block; ++c) sources[c] = row(c0 + c);
    for (index_t d = 0; d < cols; ++d) {
      T* out = dst + d * dst_stride + c0;
      for (index_t c = 0; c < block; ++c) out[c] = sources[c][d];
    }
  }
}

/// True when x[0 .. n) holds no NaN or Inf: x - x is 0 exactly for finite x and NaN otherwise,
/// so one vector OR of the differences' NaN masks answers for a whole row.
template <class T>
bool all_finite(const T* x, index_t n) {
  constexpr index_t kW = static_cast<index_t>(kWidth<T>);
  Batch<T> sum(T(0));
  index_t i = 0;
  for (; i + kW <= n; i += kW) {
    const Batch<T> v = Batch<T>::load_unaligned(x + i);
    sum += v - v;
  }
  T tail = 0;
  for (; i < n; ++i) tail += x[i] - x[i];
  return !xsimd::any(xsimd::isnan(sum)) && tail == tail;
}

}  // namespace attnkit::simd
