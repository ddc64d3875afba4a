#pragma once
// Dot products of a few float query rows with one key row of a KV cache, the key widened in
// registers (decode's scores: every key is read once from memory and used by every query row
// of its GQA group).

#include <algorithm>
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

/// Vectors of the first key of a tile held in registers at once: 8 (a whole float row of 128
/// values) with AVX-512's 32 registers, next to 8 accumulators, a vector of the second key and
/// a query vector; 4 with 16 registers.
inline constexpr index_t kHeldKeyVectors = kVectorRegisters<float> >= 32 ? 8 : 4;

/// Vectors of a key loaded together: an 8-bit block's (one scale), else one.
template <class E>
inline constexpr index_t key_vector_group = std::is_same_v<E, q8_0_block>
                                                ? static_cast<index_t>(q8_0_block::kValues / kWidth<float>)
                                                : index_t{1};

/// The FMAs of kSpan vectors of one or two keys from value d0 on into acc (key_dots_tile's
/// accumulators): the first key's vectors held in registers, the second's streamed a group at
/// a time (an 8-bit block's vectors, else one), each query vector loaded once for both keys.
/// A function, not a lambda, and its loops unrolled by pragma: as a lambda GCC inlined it after
/// the pass that puts arrays in registers, so the accumulators and held vectors lived on the
/// stack, and it left the loop over the span's vectors rolled. One call over 512 keys in
/// cache, ns per key and kv head (AMD EPYC family 26): float 38 -> 29, float16 20.2 -> 18.1,
/// bfloat16 19.8 -> 17.8, 8-bit blocks 25.2 -> 21.1.
template <index_t kRows, index_t kKeys, index_t kSpan, class E>
[[gnu::always_inline]] inline void key_dots_span(const float* queries, index_t query_stride, const E* first,
                                                 const E* second, index_t d0, Batch<float> (&acc)[kKeys * kRows]) {
  constexpr index_t kW = static_cast<index_t>(kWidth<float>);
  constexpr index_t kGroup = key_vector_group<E>;
  Batch<float> held[kSpan];
  load_widened_vectors(first, d0, held);
#pragma GCC unroll 16
  for (index_t g = 0; g < kSpan; g += kGroup) {
    [[maybe_unused]] Batch<float> streamed[kGroup];
    if constexpr (kKeys == 2) load_widened_vectors(second, d0 + g * kW, streamed);
#pragma GCC unroll 16
    for (index_t e = 0; e < kGroup; ++e) {
      const index_t d = d0 + (g + e) * kW;
#pragma GCC unroll 4
      for (index_t r = 0; r < kRows; ++r) {
        Batch<float> query = Batch<float>::load_unaligned(queries + r * query_stride + d);
        // Loaded once for both keys; for one key an operand of its FMA.
        if constexpr (kKeys == 2) keep_in_register(query);
        acc[r] = fma(query, held[g + e], acc[r]);
        if constexpr (kKeys == 2) acc[kRows + r] = fma(query, streamed[e], acc[kRows + r]);
      }
    }
  }
}

/// The dot products of kRows query rows with kKeys (1 or 2) consecutive keys (key_stride
/// elements apart), one accumulator per pair, all summed by one parallel reduction
/// (simd::lane_sums). Both keys are read in address order: kHeldKeyVectors vectors of the
/// first key into registers, then the same vectors of the second one a vector at a time, each
/// query vector loaded once for the FMAs of both keys. A key at a time, every FMA loaded its
/// query vector (with 4 rows 1.25 loads per FMA, where the core issues 2 loads and 2 FMAs per
/// cycle); two keys need 0.75, and one reduction per two keys. (Before decode prefetched its
/// rows into L1, a tile reading 4 keys' d-th vectors in turn streamed a float cache from
/// memory at half the read probe's speed; with the prefetch, key_dots_four_keys does not:
/// docs/notes/decode-streaming.md.) Rows 0 and 1 of `ahead` are prefetched
/// before the keys are read. Inlined into the loop over keys: as a call per
/// tile its prologue and spills cost as much as the FMAs.
template <index_t kRows, index_t kKeys, class E>
[[gnu::always_inline]] inline void key_dots_tile(const float* queries, index_t query_stride, const E* keys,
                                                 index_t key_stride, index_t head_dim, float* scores,
                                                 index_t score_stride, const RowPrefetch<E>& ahead) {
  static_assert(kKeys == 1 || kKeys == 2, "a tile holds one key or two");
  constexpr index_t kW = static_cast<index_t>(kWidth<float>);
  constexpr index_t kGroup = key_vector_group<E>;
  constexpr index_t kHeld = std::max(kHeldKeyVectors, kGroup);  // whole blocks (8 vectors with SSE)
  const index_t whole = head_dim - head_dim % kW;
  const E* second = keys + key_stride;
  Batch<float> acc[kKeys * kRows];  // acc[k * kRows + r]: key k, query row r
#pragma GCC unroll 16
  for (Batch<float>& a : acc) a = Batch<float>(0.0f);
  ahead.rows(0, kKeys);
  index_t d0 = 0;
  for (; d0 + kHeld * kW <= whole; d0 += kHeld * kW)
    key_dots_span<kRows, kKeys, kHeld>(queries, query_stride, keys, second, d0, acc);
  for (; d0 < whole; d0 += kGroup * kW)
    key_dots_span<kRows, kKeys, kGroup>(queries, query_stride, keys, second, d0, acc);
  if (whole < head_dim) {  // never for 8-bit blocks, whose rows are whole blocks
    Batch<float> tail[kKeys];
    tail[0] = load_widened_tail(keys, whole, head_dim);
    if constexpr (kKeys == 2) tail[1] = load_widened_tail(second, whole, head_dim);
#pragma GCC unroll 16
    for (index_t r = 0; r < kRows; ++r) {
      const Batch<float> query = Batch<float>::load_unaligned(queries + r * query_stride + whole);
#pragma GCC unroll 16
      for (index_t k = 0; k < kKeys; ++k) acc[k * kRows + r] = fma(query, tail[k], acc[k * kRows + r]);
    }
  }
  alignas(64) float sums[(kKeys * kRows + kW - 1) / kW * kW];
  lane_sums(acc, sums);
#pragma GCC unroll 16
  for (index_t k = 0; k < kKeys; ++k)
#pragma GCC unroll 16
    for (index_t r = 0; r < kRows; ++r) scores[r * score_stride + k] = sums[k * kRows + r];
}

/// Whether kRows rows take keys four at a time: 4 * kRows accumulators, a group of vectors of
/// each of the four keys and a query vector must fit the registers (AVX-512 with 4 rows: 21,
/// or 25 for 8-bit blocks, of 32). Elsewhere pairs; fewer rows would fit too, but only groups
/// of four rows were measured faster.
template <index_t kRows, class E>
inline constexpr bool kFourKeyTiles = kRows == 4 && 4 * kRows + 4 * key_vector_group<E> + 1 <= kVectorRegisters<float>;

/// acc[r * 4 + k] += query row r's vector at value d times keys[k][e], for kRows rows: each
/// query vector loaded once for the four keys. A function taking the loaded array itself (see
/// key_dots_span): as a lambda, or given a copy of the four vectors, GCC kept the vectors on
/// the stack and folded them into the FMAs as memory operands (the call in cache 25 -> 30 ns
/// per key and kv head for float).
template <index_t kRows, index_t kGroup>
[[gnu::always_inline]] inline void four_key_fmas(const float* queries, index_t query_stride, index_t d,
                                                 const Batch<float> (&keys)[4][kGroup], index_t e,
                                                 Batch<float> (&acc)[kRows * 4]) {
#pragma GCC unroll 4
  for (index_t r = 0; r < kRows; ++r) {
    const Batch<float> query = Batch<float>::load_unaligned(queries + r * query_stride + d);
#pragma GCC unroll 4
    for (index_t k = 0; k < 4; ++k) acc[r * 4 + k] = fma(query, keys[k][e], acc[r * 4 + k]);
  }
}

/// The dot products of kRows query rows with four consecutive keys: each step loads a group of
/// vectors (one, or an 8-bit block's) of the four keys, then each query vector once for four
/// FMAs (0.5 loads per FMA, against 0.75 for a pair); one reduction per 16 scores, the
/// accumulators row by row so that a row's four scores lie together. The four rows' lines are
/// in L1 by then (decode prefetches them 8 KiB ahead), so reading them in turn costs nothing
/// over address order: on an AMD EPYC family 26 (docs/notes/decode-streaming.md,
/// caches"), a decode call 5-8% faster in cache than with pairs and 3-8% over memory.
template <index_t kRows, class E>
[[gnu::always_inline]] inline void key_dots_four_keys(const float* queries, index_t query_stride, const E* keys,
                                                      index_t key_stride, index_t head_dim, float* scores,
                                                      index_t score_stride, const RowPrefetch<E>& ahead) {
  constexpr index_t kW = static_cast<index_t>(kWidth<float>);
  constexpr index_t kGroup = key_vector_group<E>;
  const index_t whole = head_dim - head_dim % kW;  // head_dim for 8-bit blocks: whole blocks
  Batch<float> acc[kRows * 4];                     // acc[r * 4 + k]: query row r, key k
#pragma GCC unroll 16
  for (Batch<float>& a : acc) a = Batch<float>(0.0f);
  ahead.rows(0, 4);
#pragma GCC unroll 2
  for (index_t d0 = 0; d0 < whole; d0 += kGroup * kW) {
    Batch<float> vectors[4][kGroup];
#pragma GCC unroll 16
    for (index_t k = 0; k < 4; ++k) load_widened_vectors(keys + k * key_stride, d0, vectors[k]);
#pragma GCC unroll 16
    for (index_t e = 0; e < kGroup; ++e) four_key_fmas<kRows>(queries, query_stride, d0 + e * kW, vectors, e, acc);
  }
  if (whole < head_dim) {  // never for 8-bit blocks
    Batch<float> tail[4][1];
#pragma GCC unroll 16
    for (index_t k = 0; k < 4; ++k) tail[k][0] = load_widened_tail(keys + k * key_stride, whole, head_dim);
    four_key_fmas<kRows>(queries, query_stride, whole, tail, 0, acc);
  }
  alignas(64) float sums[(kRows * 4 + kW - 1) / kW * kW];
  lane_sums(acc, sums);
#pragma GCC unroll 16
  for (index_t r = 0; r < kRows; ++r)
#pragma GCC unroll 16
    for (index_t k = 0; k < 4; ++k) scores[r * score_stride + k] = sums[r * 4 + k];
}

/// key_dots for kRows rows: keys four at a time where they fit the registers
/// (kFourKeyTiles), then two at a time, then the last one alone. Never inlined:
/// inlined into decode's chunk loop, GCC kept the tile's accumulators on the stack (a load and
/// a store around every FMA, 1.8x the time of the scores).
template <index_t kRows, class E>
[[gnu::noinline]] void key_dots_rows(const float* queries, index_t query_stride, const E* keys, index_t key_stride,
                                     index_t count, index_t head_dim, float* scores, index_t score_stride,
                                     const RowPrefetch<E>& ahead) {
  index_t c = 0;
  if constexpr (kFourKeyTiles<kRows, E>) {
    for (; c + 4 <= count; c += 4)
      key_dots_four_keys<kRows>(queries, query_stride, keys + c * key_stride, key_stride, head_dim, scores + c,
                                score_stride, ahead.from(c));
  }
  for (; c + 2 <= count; c += 2)
    key_dots_tile<kRows, 2>(queries, query_stride, keys + c * key_stride, key_stride, head_dim, scores + c,
                            score_stride, ahead.from(c));
  if (c < count)
    key_dots_tile<kRows, 1>(queries, query_stride, keys + c * key_stride, key_stride, head_dim, scores + c,
                            score_stride, ahead.from(c));
}

}  // namespace detail

/// scores[r * score_stride + c] = <queries[r], key c> for r < rows and c < count: queries
/// [rows x query_stride] floats, zero from head_dim up to the next multiple of the vector
/// width; keys `count` cache rows of head_dim values (element type E, see load_widened),
/// key_stride elements apart, each read only up to its end and widened in registers. Rows go
/// four at a time (then two, then one), keys four at a time where kFourKeyTiles (else two at
/// a time); the first rows read
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
