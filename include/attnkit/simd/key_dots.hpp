#pragma once
// Dot products of a few float query rows with one key row of a KV cache, the key widened in
// registers (decode's scores: every key is read once from memory and used by every query row
// of its GQA group).

#include <cstddef>
#include <type_traits>

#include "attnkit/core/half.hpp"
#include "attnkit/core/index.hpp"
#include "attnkit/simd/batch.hpp"
#include "attnkit/simd/prefetch.hpp"
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
/// apart), one accumulator per pair, all summed by one parallel reduction (simd::lane_sums).
/// Key by key, each key's vectors in address order: a tile reading the keys' d-th vectors in
/// turn (four rows 512 bytes apart for a float cache) streamed from memory at half the read
/// probe's speed (docs/architecture.md, "Decode over KV caches").
/// Row k of `ahead` is prefetched before key k is read. Inlined into the loop over keys: as a
/// call per tile its prologue and spills cost as much as the FMAs.
template <index_t kRows, index_t kKeys, class E>
[[gnu::always_inline]] inline void key_dots_tile(const float* queries, index_t query_stride, const E* keys,
                                                 index_t key_stride, index_t head_dim, float* scores,
                                                 index_t score_stride, const RowPrefetch<E>& ahead) {
  constexpr index_t kW = static_cast<index_t>(kWidth<float>);
  constexpr index_t kPairs = kRows * kKeys;
  // 8-bit blocks a block at a time (their rows hold whole blocks): each key's float16 scale
  // converted once per block, not once per vector.
  constexpr bool kBlocks = std::is_same_v<E, q8_0_block>;
  constexpr index_t kStep = kBlocks ? static_cast<index_t>(q8_0_block::kValues) : kW;
  const index_t whole = head_dim - head_dim % kW;
  Batch<float> acc[kPairs];
  for (index_t k = 0; k < kKeys; ++k) {
    ahead.rows(k, k + 1);
    const E* key = keys + k * key_stride;
    Batch<float>* pair = acc + k * kRows;  // the accumulators of key k, one per row
    for (index_t r = 0; r < kRows; ++r) pair[r] = Batch<float>(0.0f);
    for (index_t d0 = 0; d0 < whole; d0 += kStep) {
      [[maybe_unused]] Batch<float> scale;
      if constexpr (kBlocks) scale = q8_scale(key, d0);
      for (index_t e = 0; e < kStep; e += kW) {
        const index_t d = d0 + e;
        Batch<float> values;
        if constexpr (kBlocks) {
          values = load_q8_values(key, d) * scale;
        } else {
          values = load_widened(key, d);
        }
        keep_in_register(values);
        // Query vectors are read from L1 by each FMA (operands, not registers).
        for (index_t r = 0; r < kRows; ++r)
          pair[r] = fma(Batch<float>::load_unaligned(queries + r * query_stride + d), values, pair[r]);
      }
    }
    if (whole < head_dim) {
      const Batch<float> values = load_widened_tail(key, whole, head_dim);
      for (index_t r = 0; r < kRows; ++r)
        pair[r] = fma(Batch<float>::load_unaligned(queries + r * query_stride + whole), values, pair[r]);
    }
  }
  alignas(64) float sums[kW];
  lane_sums(acc, sums);
  for (index_t k = 0; k < kKeys; ++k)
    for (index_t r = 0; r < kRows; ++r) scores[r * score_stride + k] = sums[k * kRows + r];
}

/// Keys per tile of kRows rows: one for float and half caches, whose scores stream from memory
/// fastest a key at a time (a float16 cache 0.50 -> 0.59 of the read probe with 4 query rows,
/// float 0.66 -> 0.76, against tiles of 4 keys); tiles filling one reduction vector for 8-bit
/// blocks, whose scores are bound by dequantizing and by the reduction a tile of one key pays
/// per key (0.33 -> 0.27 a key at a time). Figures: docs/architecture.md, "Decode over KV caches".
template <index_t kRows, class E>
inline constexpr index_t kKeyDotsTileKeys = std::is_same_v<E, q8_0_block> ? static_cast<index_t>(kWidth<float>) / kRows
                                                                          : 1;

/// key_dots for kRows rows: keys in tiles of kKeyDotsTileKeys, then one at a time. Never
/// inlined: inlined into decode's chunk loop, GCC kept the tile's accumulators on the stack
/// (a load and a store around every FMA, 1.8x the time of the scores).
template <index_t kRows, class E>
[[gnu::noinline]] void key_dots_rows(const float* queries, index_t query_stride, const E* keys, index_t key_stride,
                                     index_t count, index_t head_dim, float* scores, index_t score_stride,
                                     const RowPrefetch<E>& ahead) {
  constexpr index_t kKeys = kKeyDotsTileKeys<kRows, E>;
  index_t c = 0;
  for (; c + kKeys <= count; c += kKeys)
    key_dots_tile<kRows, kKeys>(queries, query_stride, keys + c * key_stride, key_stride, head_dim, scores + c,
                                score_stride, ahead.from(c));
  for (; c < count; ++c)
    key_dots_tile<kRows, 1>(queries, query_stride, keys + c * key_stride, key_stride, head_dim, scores + c,
                            score_stride, ahead.from(c));
}

}  // namespace detail

/// scores[r * score_stride + c] = <queries[r], key c> for r < rows and c < count: queries
/// [rows x query_stride] floats, zero from head_dim up to the next multiple of the vector
/// width; keys `count` cache rows of head_dim values (element type E, see load_widened),
/// key_stride elements apart, each read only up to its end and widened in registers. Rows go
/// four at a time (then two, then one), keys in tiles (kKeyDotsTileKeys); the first rows read
/// the keys from memory, prefetching row c of `ahead` before key c (decode passes the next
/// block's rows: one row requested per row read), the others from L1. Each product is summed
/// in a fixed order, so every build of one instruction set gives the same bits.
template <class E>
void key_dots(const float* queries, index_t query_stride, index_t rows, const E* keys, index_t key_stride,
              index_t count, index_t head_dim, float* scores, index_t score_stride, const RowPrefetch<E>& ahead = {}) {
  constexpr index_t kW = static_cast<index_t>(kWidth<float>);
  index_t r = 0;
  const auto next_ahead = [&] { return r == 0 ? ahead : RowPrefetch<E>{}; };
  if constexpr (kW >= 4) {
    for (; r + 4 <= rows; r += 4)
      detail::key_dots_rows<4>(queries + r * query_stride, query_stride, keys, key_stride, count, head_dim,
                               scores + r * score_stride, score_stride, next_ahead());
  }
  if (r + 2 <= rows) {
    detail::key_dots_rows<2>(queries + r * query_stride, query_stride, keys, key_stride, count, head_dim,
                             scores + r * score_stride, score_stride, next_ahead());
    r += 2;
  }
  if (r < rows) {
    detail::key_dots_rows<1>(queries + r * query_stride, query_stride, keys, key_stride, count, head_dim,
                             scores + r * score_stride, score_stride, next_ahead());
  }
}

}  // namespace attnkit::simd
