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

/// The dot products of kRows query rows with kKeys consecutive keys (key_stride elements
/// apart), one accumulator per pair. Inlined into the loop over a run of keys: as a call per
/// tile of two keys its prologue and spills cost as much as the FMAs. When the pairs fill a
/// vector (kRows * kKeys = the width: 4 x 2 with AVX2, 4 x 4 with AVX-512) one parallel
/// reduction (simd::lane_sums) sums them all; otherwise each pair is summed on its own.
template <index_t kRows, index_t kKeys, class E>
[[gnu::always_inline]] inline void key_dots_tile(const float* queries, index_t query_stride, const E* keys,
                                                 index_t key_stride, index_t head_dim, float* scores,
                                                 index_t score_stride) {
  constexpr index_t kW = static_cast<index_t>(kWidth<float>);
  constexpr index_t kPairs = kRows * kKeys;
  Batch<float> acc[kPairs];
  for (index_t e = 0; e < kPairs; ++e) acc[e] = Batch<float>(0.0f);
  // 8-bit blocks a block at a time (their rows hold whole blocks): each key's float16 scale
  // converted once per block, not once per vector.
  constexpr bool kBlocks = std::is_same_v<E, q8_0_block>;
  constexpr index_t kStep = kBlocks ? static_cast<index_t>(q8_0_block::kValues) : kW;
  const index_t whole = head_dim - head_dim % kW;
  for (index_t d0 = 0; d0 < whole; d0 += kStep) {
    [[maybe_unused]] Batch<float> scales[kKeys];
    if constexpr (kBlocks) {
      for (index_t k = 0; k < kKeys; ++k) scales[k] = q8_scale(keys + k * key_stride, d0);
    }
    for (index_t e = 0; e < kStep; e += kW) {
      const index_t d = d0 + e;
      // Query vectors are read from L1 by each FMA: held in registers beside 8 accumulators
      // they made GCC spill the accumulators on AVX2's 16 registers.
      for (index_t k = 0; k < kKeys; ++k) {
        Batch<float> key;
        if constexpr (kBlocks) {
          key = load_q8_values(keys + k * key_stride, d) * scales[k];
        } else {
          key = load_widened(keys + k * key_stride, d);
        }
        keep_in_register(key);
        for (index_t r = 0; r < kRows; ++r)
          acc[r * kKeys + k] =
              fma(Batch<float>::load_unaligned(queries + r * query_stride + d), key, acc[r * kKeys + k]);
      }
    }
  }
  if (whole < head_dim) {
    for (index_t k = 0; k < kKeys; ++k) {
      const Batch<float> key = load_widened_tail(keys + k * key_stride, whole, head_dim);
      for (index_t r = 0; r < kRows; ++r) {
        const Batch<float> q = Batch<float>::load_unaligned(queries + r * query_stride + whole);
        acc[r * kKeys + k] = fma(q, key, acc[r * kKeys + k]);
      }
    }
  }
  if constexpr (kPairs == kW) {
    alignas(64) float sums[kW];
    lane_sums(acc, sums);
    for (index_t r = 0; r < kRows; ++r)
      for (index_t k = 0; k < kKeys; ++k) scores[r * score_stride + k] = sums[r * kKeys + k];
  } else {
    for (index_t r = 0; r < kRows; ++r)
      for (index_t k = 0; k < kKeys; ++k) scores[r * score_stride + k] = xsimd::hadd(acc[r * kKeys + k]);
  }
}

/// key_dots for kRows rows: keys in tiles filling one reduction vector, then one at a time.
/// Never inlined: inlined into decode's chunk loop, GCC kept the tile's accumulators on the
/// stack (a load and a store around every FMA, 1.8x the time of the scores).
template <index_t kRows, class E>
[[gnu::noinline]] void key_dots_rows(const float* queries, index_t query_stride, const E* keys, index_t key_stride,
                                     index_t count, index_t head_dim, float* scores, index_t score_stride) {
  constexpr index_t kKeys = static_cast<index_t>(kWidth<float>) / kRows;
  index_t c = 0;
  for (; c + kKeys <= count; c += kKeys)
    key_dots_tile<kRows, kKeys>(queries, query_stride, keys + c * key_stride, key_stride, head_dim, scores + c,
                                score_stride);
  for (; c < count; ++c)
    key_dots_tile<kRows, 1>(queries, query_stride, keys + c * key_stride, key_stride, head_dim, scores + c,
                            score_stride);
}

}  // namespace detail

/// scores[r * score_stride + c] = <queries[r], key c> for r < rows and c < count: queries
/// [rows x query_stride] floats, zero from head_dim up to the next multiple of the vector
/// width; keys `count` cache rows of head_dim values (element type E, see load_widened),
/// key_stride elements apart, each read only up to its end and widened in registers. Rows go
/// four at a time (then two, then one), keys in tiles of width / rows; each product is summed
/// in a fixed order, so every build of one instruction set gives the same bits.
template <class E>
void key_dots(const float* queries, index_t query_stride, index_t rows, const E* keys, index_t key_stride,
              index_t count, index_t head_dim, float* scores, index_t score_stride) {
  constexpr index_t kW = static_cast<index_t>(kWidth<float>);
  index_t r = 0;
  if constexpr (kW >= 4) {
    for (; r + 4 <= rows; r += 4)
      detail::key_dots_rows<4>(queries + r * query_stride, query_stride, keys, key_stride, count, head_dim,
                               scores + r * score_stride, score_stride);
  }
  if (r + 2 <= rows) {
    detail::key_dots_rows<2>(queries + r * query_stride, query_stride, keys, key_stride, count, head_dim,
                             scores + r * score_stride, score_stride);
    r += 2;
  }
  if (r < rows) {
    detail::key_dots_rows<1>(queries + r * query_stride, query_stride, keys, key_stride, count, head_dim,
                             scores + r * score_stride, score_stride);
  }
}

}  // namespace attnkit::simd
