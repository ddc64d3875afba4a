#pragma once
// Register-blocked micro-kernel for one score tile S = Q_tile K_tile^T.

#include "attnkit/core/index.hpp"
#include "attnkit/simd/batch.hpp"

namespace attnkit::simd {

/// Rows of Q per register block of score_tile; callers pad query tiles to a multiple of it.
inline constexpr index_t kScoreRowBlock = 4;
/// Most vectors of keys per register block.
inline constexpr index_t kScoreVectorBlock = 4;

/// score_tile's default epilogue: the scores as they are. An epilogue takes one accumulator
/// and where it lies in the score tile (its row, and the column of its first lane) and returns
/// the vector to store.
struct PlainScores {
  template <class T>
  Batch<T> operator()(const Batch<T>& scores, index_t /*row*/, index_t /*column*/) const {
    return scores;
  }
};

namespace detail {

/// One [kR x kVectors * width] block of S at rows row0.. and columns column0.. of the score
/// tile (q, kt and s already point there): per d, kVectors key loads, kR query broadcasts
/// and kR * kVectors FMAs; each accumulator goes through `epilogue` on its way out. The
/// pragmas unroll the constant-count loops at -O2 as well (GCC 12 at -O2 left acc in memory:
/// the kernel ran 4x slower than at -O3).
template <class T, index_t kR, index_t kVectors, class Epilogue>
void score_block(const T* q, index_t head_dim, const T* kt, index_t panel_cols, T* s, index_t s_stride, index_t row0,
                 index_t column0, const Epilogue& epilogue) {
  constexpr index_t kW = static_cast<index_t>(kWidth<T>);
  Batch<T> acc[kR][kVectors];
#pragma GCC unroll 16
  for (index_t r = 0; r < kR; ++r)
#pragma GCC unroll 16
    for (index_t v = 0; v < kVectors; ++v) acc[r][v] = Batch<T>(T(0));
  for (index_t d = 0; d < head_dim; ++d, kt += panel_cols) {
    Batch<T> keys[kVectors];
#pragma GCC unroll 16
    for (index_t v = 0; v < kVectors; ++v) {
      keys[v] = Batch<T>::load_unaligned(kt + v * kW);
      keep_in_register(keys[v]);
    }
#pragma GCC unroll 16
    for (index_t r = 0; r < kR; ++r) {
      const Batch<T> query(q[r * head_dim + d]);
#pragma GCC unroll 16
      for (index_t v = 0; v < kVectors; ++v) acc[r][v] = simd::fma(query, keys[v], acc[r][v]);
    }
  }
#pragma GCC unroll 16
  for (index_t r = 0; r < kR; ++r)
#pragma GCC unroll 16
    for (index_t v = 0; v < kVectors; ++v)
      epilogue(acc[r][v], row0 + r, column0 + v * kW).store_aligned(s + r * s_stride + v * kW);
}

/// The last 1 .. kScoreVectorBlock - 1 vectors of a score tile, rows [0, rows): in blocks of
/// 2 * kScoreRowBlock rows while they last and the registers hold them (accumulators, keys
/// and one broadcast), so a narrow block still has 8 - 24 independent FMAs per d and more
/// FMAs per load (a 4 x 2 block left the FMA units half idle on the 32-key edge tiles of a
/// band).
template <class T, index_t kVectors, class Epilogue>
void score_tail(const T* q, index_t head_dim, const T* kt, index_t panel_cols, index_t rows, T* s, index_t s_stride,
                index_t column0, const Epilogue& epilogue) {
  constexpr index_t kWide = 2 * kScoreRowBlock;
  index_t r0 = 0;
  if constexpr ((kWide + 1) * kVectors + 1 <= kVectorRegisters<T>) {
    for (; r0 + kWide <= rows; r0 += kWide) {
      score_block<T, kWide, kVectors>(q + r0 * head_dim, head_dim, kt, panel_cols, s + r0 * s_stride, s_stride, r0,
                                      column0, epilogue);
    }
  }
  for (; r0 < rows; r0 += kScoreRowBlock) {
    score_block<T, kScoreRowBlock, kVectors>(q + r0 * head_dim, head_dim, kt, panel_cols, s + r0 * s_stride, s_stride,
                                             r0, column0, epilogue);
  }
}

}  // namespace detail

/// S[r][c] = sum_d Q[r][d] * KT[d][c] for r < rows (rounded up to kScoreRowBlock) and
/// c < cols rounded up to whole vectors.
///   q:  [rows x head_dim] row-major, rows padded with zeros to the row block
///   kt: K^T panel, row d at kt + d * panel_cols; readable for round_up(cols, width) columns
///   s:  [rows x s_stride] row-major, aligned, s_stride a multiple of the width
template <class T, class Epilogue = PlainScores>
void score_tile(const T* q, index_t head_dim, const T* kt, index_t panel_cols, index_t rows, index_t cols, T* s,
                index_t s_stride, const Epilogue& epilogue = {}) {
  constexpr index_t kW = static_cast<index_t>(kWidth<T>);
  const index_t vectors = (cols + kW - 1) / kW;
  const index_t full_blocks = vectors / kScoreVectorBlock * kScoreVectorBlock;
  for (index_t r0 = 0; r0 < rows; r0 += kScoreRowBlock) {
    const T* q_rows = q + r0 * head_dim;
    T* s_rows = s + r0 * s_stride;
    for (index_t v0 = 0; v0 < full_blocks; v0 += kScoreVectorBlock) {
      detail::score_block<T, kScoreRowBlock, kScoreVectorBlock>(q_rows, head_dim, kt + v0 * kW, panel_cols,
                                                                s_rows + v0 * kW, s_stride, r0, v0 * kW, epilogue);
    }
  }
  const T* kt_tail = kt + full_blocks * kW;
  T* s_tail = s + full_blocks * kW;
  switch (vectors - full_blocks) {
    case 3:
      detail::score_tail<T, 3>(q, head_dim, kt_tail, panel_cols, rows, s_tail, s_stride, full_blocks * kW, epilogue);
      break;
    case 2:
      detail::score_tail<T, 2>(q, head_dim, kt_tail, panel_cols, rows, s_tail, s_stride, full_blocks * kW, epilogue);
      break;
    case 1:
      detail::score_tail<T, 1>(q, head_dim, kt_tail, panel_cols, rows, s_tail, s_stride, full_blocks * kW, epilogue);
      break;
    default:
      break;
  }
}

}  // namespace attnkit::simd
