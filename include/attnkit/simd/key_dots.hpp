#pragma once
// Dot products of a few float query rows with one key row of a KV cache, the key widened in
// registers (decode's scores: every key is read once from memory and used by every query row
// of its GQA group).

#include <cstddef>
#include <type_traits>

#include "attnkit/core/half.hpp"
#include "attnkit/core/index.hpp"
#include "attnkit/simd/batch.hpp"
#include "attnkit/simd/widening_load.hpp"

namespace attnkit::simd {

namespace detail {

/// The values key[d .. head_dim) in the first lanes of a vector, zeros after (a head dim that
/// is not a multiple of the width; never for 8-bit blocks, whose rows are whole blocks).
template <class E>
Batch<float> load_widened_tail(const E* key, index_t d, index_t head_dim) {
  alignas(64) float lanes[kWidth<float>] = {};
  if constexpr (!std::is_same_v<E, q8_0_block>) {
    for (index_t i = d; i < head_dim; ++i) lanes[i - d] = widen(key[i]);
  }
  return Batch<float>::load_aligned(lanes);
}

/// kRows dot products, two accumulators per row so that consecutive FMAs of one row do not
/// wait for each other.
template <index_t kRows, class E>
void key_dots_block(const float* queries, index_t query_stride, const E* key, index_t head_dim, float* scores,
                    index_t score_stride) {
  constexpr index_t kW = static_cast<index_t>(kWidth<float>);
  Batch<float> acc[kRows][2];
  for (index_t r = 0; r < kRows; ++r) acc[r][0] = acc[r][1] = Batch<float>(0.0f);
  const index_t whole = head_dim - head_dim % kW;
  index_t d = 0;
  for (; d + 2 * kW <= whole; d += 2 * kW) {
    Batch<float> k0 = load_widened(key, d), k1 = load_widened(key, d + kW);
    keep_in_register(k0);
    keep_in_register(k1);
    for (index_t r = 0; r < kRows; ++r) {
      const float* q = queries + r * query_stride + d;
      acc[r][0] = fma(Batch<float>::load_unaligned(q), k0, acc[r][0]);
      acc[r][1] = fma(Batch<float>::load_unaligned(q + kW), k1, acc[r][1]);
    }
  }
  if (d < whole) {
    Batch<float> k0 = load_widened(key, d);
    keep_in_register(k0);
    for (index_t r = 0; r < kRows; ++r)
      acc[r][0] = fma(Batch<float>::load_unaligned(queries + r * query_stride + d), k0, acc[r][0]);
    d += kW;
  }
  if (d < head_dim) {
    Batch<float> k0 = load_widened_tail(key, d, head_dim);
    for (index_t r = 0; r < kRows; ++r)
      acc[r][0] = fma(Batch<float>::load_unaligned(queries + r * query_stride + d), k0, acc[r][0]);
  }
  for (index_t r = 0; r < kRows; ++r) scores[r * score_stride] = xsimd::hadd(acc[r][0] + acc[r][1]);
}

}  // namespace detail

/// scores[r * score_stride] = <queries[r], key> for r < rows: queries [rows x query_stride]
/// floats, zero from head_dim up to the next multiple of the vector width; key one cache row
/// of head_dim values (element type E, see load_widened), read only up to its end. Rows go
/// four at a time; each product is summed in a fixed order, so every build of one instruction
/// set gives the same bits.
template <class E>
void key_dots(const float* queries, index_t query_stride, index_t rows, const E* key, index_t head_dim, float* scores,
              index_t score_stride) {
  index_t r = 0;
  for (; r + 4 <= rows; r += 4)
    detail::key_dots_block<4>(queries + r * query_stride, query_stride, key, head_dim, scores + r * score_stride,
                              score_stride);
  const float* rest = queries + r * query_stride;
  float* rest_scores = scores + r * score_stride;
  switch (rows - r) {
    case 3:
      detail::key_dots_block<3>(rest, query_stride, key, head_dim, rest_scores, score_stride);
      break;
    case 2:
      detail::key_dots_block<2>(rest, query_stride, key, head_dim, rest_scores, score_stride);
      break;
    case 1:
      detail::key_dots_block<1>(rest, query_stride, key, head_dim, rest_scores, score_stride);
      break;
    default:
      break;
  }
}

}  // namespace attnkit::simd
