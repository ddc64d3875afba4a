#pragma once
// Register-blocked micro-kernel for one score tile S = Q_tile K_tile^T.

#include "attnkit/core/index.hpp"
#include "attnkit/simd/batch.hpp"

namespace attnkit::simd {

/// Rows of Q per register block of score_tile; callers pad query tiles to a multiple of it.
inline constexpr index_t kScoreRowBlock = 4;
/// Most vectors of keys per register block.
inline constexpr index_t kScoreVectorBlock = 4;

namespace detail {

/// One [kScoreRowBlock x kVectors * width] block of S: per d, kVectors key loads,
/// kScoreRowBlock query broadcasts and kScoreRowBlock * kVectors FMAs.
template <class T, index_t kVectors>
void score_block(const T* q, index_t head_dim, const T* kt, index_t panel_cols, T* s, index_t s_stride) {
  constexpr index_t kW = static_cast<index_t>(kWidth<T>);
  constexpr index_t kR = kScoreRowBlock;
  Batch<T> acc[kR][kVectors];
  for (index_t r = 0; r < kR; ++r)
    for (index_t v = 0; v < kVectors; ++v) acc[r][v] = Batch<T>(T(0));
  for (index_t d = 0; d < head_dim; ++d, kt += panel_cols) {
    Batch<T> keys[kVectors];
    for (index_t v = 0; v < kVectors; ++v) {
      keys[v] = Batch<T>::load_unaligned(kt + v * kW);
      keep_in_register(keys[v]);
    }
    for (index_t r = 0; r < kR; ++r) {
      const Batch<T> query(q[r * head_dim + d]);
      for (index_t v = 0; v < kVectors; ++v) acc[r][v] = xsimd::fma(query, keys[v], acc[r][v]);
    }
  }
  for (index_t r = 0; r < kR; ++r)
    for (index_t v = 0; v < kVectors; ++v) acc[r][v].store_aligned(s + r * s_stride + v * kW);
}

}  // namespace detail

/// S[r][c] = sum_d Q[r][d] * KT[d][c] for r < rows (rounded up to kScoreRowBlock) and
/// c < cols rounded up to whole vectors.
///   q:  [rows x head_dim] row-major, rows padded with zeros to the row block
///   kt: K^T panel, row d at kt + d * panel_cols; readable for round_up(cols, width) columns
///   s:  [rows x s_stride] row-major, aligned, s_stride a multiple of the width
template <class T>
void score_tile(const T* q, index_t head_dim, const T* kt, index_t panel_cols, index_t rows, index_t cols, T* s,
                index_t s_stride) {
  constexpr index_t kW = static_cast<index_t>(kWidth<T>);
  const index_t vectors = (cols + kW - 1) / kW;
  for (index_t r0 = 0; r0 < rows; r0 += kScoreRowBlock) {
    const T* q_rows = q + r0 * head_dim;
    T* s_rows = s + r0 * s_stride;
    index_t v0 = 0;
    for (; v0 + kScoreVectorBlock <= vectors; v0 += kScoreVectorBlock) {
      detail::score_block<T, kScoreVectorBlock>(q_rows, head_dim, kt + v0 * kW, panel_cols, s_rows + v0 * kW, s_stride);
    }
    // Remaining 1 .. kScoreVectorBlock - 1 vectors take the same kernel with a narrower block.
    switch (vectors - v0) {
      case 3:
        detail::score_block<T, 3>(q_rows, head_dim, kt + v0 * kW, panel_cols, s_rows + v0 * kW, s_stride);
        break;
      case 2:
        detail::score_block<T, 2>(q_rows, head_dim, kt + v0 * kW, panel_cols, s_rows + v0 * kW, s_stride);
        break;
      case 1:
        detail::score_block<T, 1>(q_rows, head_dim, kt + v0 * kW, panel_cols, s_rows + v0 * kW, s_stride);
        break;
      default:
        break;
    }
  }
}

}  // namespace attnkit::simd
