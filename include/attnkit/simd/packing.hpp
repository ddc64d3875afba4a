#pragma once
// Vectorised helpers for packing K and V into panels.

#include <type_traits>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "attnkit/core/index.hpp"
#include "attnkit/simd/batch.hpp"
#include "attnkit/simd/convert.hpp"

namespace attnkit::simd {

namespace detail {

#if defined(__AVX512F__)
/// Transposes the 16 x 16 float block src[r][0 .. 16) (r < 16) into dst + c * dst_stride,
/// c < 16, in registers: 32 in-lane unpacks and 32 128-bit lane shuffles instead of 256
/// scalar moves. Stage by stage, element (r, c) moves through the bits of r and c. Each
/// output line (one column, 16 rows) is multiplied by `scale` (row r's factor in lane r) when
/// kScaled.
template <bool kScaled>
void transpose_16x16(const float* const* src, index_t col, float* dst, index_t dst_stride, __m512 scale) {
  __m512 r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src[i] + col);
  for (int i = 0; i < 16; i += 2) {  // interleave pairs of rows: 2 x 2 blocks
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  const auto lo64 = [](__m512 a, __m512 b) {
    return _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
  };
  const auto hi64 = [](__m512 a, __m512 b) {
    return _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
  };
  for (int i = 0; i < 16; i += 4) {  // pairs of pairs: 4 x 4 blocks inside each 128-bit lane
    r[i] = lo64(t[i], t[i + 2]);
    r[i + 1] = hi64(t[i], t[i + 2]);
    r[i + 2] = lo64(t[i + 1], t[i + 3]);
    r[i + 3] = hi64(t[i + 1], t[i + 3]);
  }
  for (int i = 0; i < 16; i += 8) {  // lanes 0, 2 and 1, 3 of row groups i and i + 4
    for (int j = 0; j < 4; ++j) {
      t[i + j] = _mm512_shuffle_f32x4(r[i + j], r[i + j + 4], 0x88);
      t[i + j + 4] = _mm512_shuffle_f32x4(r[i + j], r[i + j + 4], 0xdd);
    }
  }
  for (int j = 0; j < 8; ++j) {  // and once more across the two halves of the rows
    r[j] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0x88);
    r[j + 8] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0xdd);
  }
  for (int c = 0; c < 16; ++c) _mm512_storeu_ps(dst + c * dst_stride, kScaled ? _mm512_mul_ps(r[c], scale) : r[c]);
}
#endif

}  // namespace detail

/// transpose_rows' row_scale for rows copied as they are.
struct Unscaled {};

/// dst[d * dst_stride + c] = row(c)[d] for c < rows, d < cols: rows of K become columns of a
/// K^T panel, each times row_scale(c) unless row_scale is Unscaled (LSH's unit-normalised
/// keys, scaled in registers on the way). Works in blocks of kWidth rows so that each
/// destination line is filled by consecutive stores while the source rows stay in L1; with
/// AVX-512, full 16 x 16 float blocks are transposed in registers (6% of a sliding-window call
/// when done element-wise).
template <class T, class RowPointer, class RowScale = Unscaled>
void transpose_rows(index_t rows, index_t cols, RowPointer&& row, T* dst, index_t dst_stride,
                    RowScale&& row_scale = {}) {
  constexpr index_t kBlock = static_cast<index_t>(kWidth<T>);
  constexpr bool kScaled = !std::is_same_v<std::remove_cvref_t<RowScale>, Unscaled>;
  for (index_t c0 = 0; c0 < rows; c0 += kBlock) {
    const index_t block = rows - c0 < kBlock ? rows - c0 : kBlock;
    const T* sources[kBlock];
    alignas(64) T scales[kBlock];
    for (index_t c = 0; c < block; ++c) {
      sources[c] = row(c0 + c);
      if constexpr (kScaled) scales[c] = static_cast<T>(row_scale(c0 + c));
    }
    index_t d = 0;
#if defined(__AVX512F__)
    if constexpr (std::is_same_v<T, float> && kBlock == 16) {
      if (block == kBlock) {
        __m512 scale = _mm512_setzero_ps();  // read only when kScaled
        if constexpr (kScaled) scale = _mm512_load_ps(scales);
        for (; d + 16 <= cols; d += 16) {
          detail::transpose_16x16<kScaled>(sources, d, dst + d * dst_stride + c0, dst_stride, scale);
        }
      }
    }
#endif
    for (; d < cols; ++d) {
      T* out = dst + d * dst_stride + c0;
      for (index_t c = 0; c < block; ++c) {
        if constexpr (kScaled) {
          out[c] = sources[c][d] * scales[c];
        } else {
          out[c] = sources[c][d];
        }
      }
    }
  }
}

/// True when x[0 .. n) holds no NaN or Inf: x - x is 0 exactly for finite x and NaN otherwise,
/// so one NaN test of the summed differences answers for a whole row.
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

/// dst[0 .. n) = src[0 .. n) (widened to T when S is a half type) and dst[n .. padded) = 0,
/// in vectors (a call to memmove per short row cost as much as the copy); returns whether
/// the row is finite (all_finite of the copy, which is then in L1). dst aligned, padded >= n.
template <class T, class S>
bool copy_padded_row(const S* src, index_t n, T* dst, index_t padded) {
  constexpr index_t kW = static_cast<index_t>(kWidth<T>);
  index_t i = 0;
  if constexpr (std::is_same_v<S, T>) {
    for (; i + kW <= n; i += kW) Batch<T>::load_unaligned(src + i).store_aligned(dst + i);
    for (; i < n; ++i) dst[i] = src[i];
  } else {
    widen_row(src, n, dst);
    i = n;
  }
  for (; i < padded; ++i) dst[i] = T(0);
  return all_finite(dst, n);
}

}  // namespace attnkit::simd
