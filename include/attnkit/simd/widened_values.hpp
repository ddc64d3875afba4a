#pragma once
// O~ = alpha O~ + P V for value rows of a KV cache, widened in registers (decode's P V: the
// rows of one block of keys, read from memory once, converted where they are used).

#include <algorithm>
#include <type_traits>

#include "attnkit/core/index.hpp"
#include "attnkit/simd/batch.hpp"
#include "attnkit/simd/prefetch.hpp"
#include "attnkit/simd/value_accumulate.hpp"
#include "attnkit/simd/widening_load.hpp"

namespace attnkit::simd {

/// A register block of O for value rows of E: 2 rows x 8 vectors of accumulators (a whole row
/// of 128 floats), 8 values and a weight on AVX-512's 32 registers; 2 x 4 on AVX2's 16. A
/// block of 4 rows x 4 vectors read each V row in two halves, a group of 8 rows' first halves
/// and then their second ones, and streamed a float cache from memory at half the probe's
/// speed where whole rows in address order reach 0.8 of it (docs/notes/decode-streaming.md). 8-bit blocks keep 4 rows x
/// 4 vectors (2 on AVX2): their P V is bound by dequantizing, which a block of 2 rows does twice per value.
template <class E>
inline constexpr index_t kWidenedValueRows = std::is_same_v<E, q8_0_block> ? 4 : 2;
template <class E>
inline constexpr index_t kWidenedValueVectors = (kVectorRegisters<float> >= 32 ? 8 : 4) /
                                                (std::is_same_v<E, q8_0_block> ? 2 : 1);

/// Keys per group: every register block takes a group of keys before the next group, so the
/// group's V rows (8 rows, 4 KiB of float at Dv = 128) are read from memory by the first block
/// and from L1 by the others.
inline constexpr index_t kWidenedValueKeys = 8;

namespace detail {

/// One block of kWidenedValueRows<E> rows x kVectors vectors of O over `keys` keys (inlined:
/// called per group of 8 keys, a call's prologue and spills cost as much as its FMAs). Before
/// key j is read, row j of `ahead` is prefetched (nullptr: none).
template <index_t kVectors, ZeroWeights kZero, class E>
[[gnu::always_inline]] inline void accumulate_widened_block(float* o, index_t o_stride, const float* alpha,
                                                            const float* p, index_t p_stride, const E* v,
                                                            index_t v_stride, index_t first_value, index_t keys,
                                                            const RowPrefetch<E>* ahead) {
  constexpr index_t kW = static_cast<index_t>(kWidth<float>);
  constexpr index_t kR = kWidenedValueRows<E>;
  Batch<float> acc[kR][kVectors];
#pragma GCC unroll 16
  for (index_t r = 0; r < kR; ++r) {
#pragma GCC unroll 16
    for (index_t c = 0; c < kVectors; ++c) acc[r][c] = Batch<float>::load_aligned(o + r * o_stride + c * kW);
    if (alpha == nullptr) continue;
    const Batch<float> rescale(alpha[r]);
#pragma GCC unroll 16
    for (index_t c = 0; c < kVectors; ++c) acc[r][c] *= rescale;
  }
  // A copy, so that its fields stay in registers (through the pointer GCC reloaded them and
  // recomputed the row's address for every key: 40 instructions of bookkeeping per key).
  const RowPrefetch<E> prefetch = ahead != nullptr ? *ahead : RowPrefetch<E>{};
  // The block's columns from one pointer per row with compile-time offsets: with first_value
  // added per key, GCC kept each vector's offset on the stack and reloaded it for every key
  // (8 loads per key for 8-bit rows). For 8-bit blocks first_value is a multiple of kVectors
  // vectors (of a block when they are more), so each block's scale is converted once for its
  // vectors, and the pointer is at a whole block.
  const E* columns = v;
  index_t value_in_column = 0;
  if constexpr (std::is_same_v<E, q8_0_block>) {
    constexpr index_t kBlockValues = static_cast<index_t>(q8_0_block::kValues);
    columns += first_value / kBlockValues;
    if constexpr (kVectors * kW % kBlockValues != 0) value_in_column = first_value % kBlockValues;
  } else {
    columns += first_value;
  }
  for (index_t j = 0; j < keys; ++j) {
    prefetch.row(j);
    Batch<float> values[kVectors];
    load_widened_vectors(columns + j * v_stride, value_in_column, values);
#pragma GCC unroll 16
    for (index_t r = 0; r < kR; ++r) {
      const float weight = p[r * p_stride + j];
      if constexpr (kZero == ZeroWeights::kSkip) {
        if (weight == 0.0f) continue;
      }
      const Batch<float> w(weight);
#pragma GCC unroll 16
      for (index_t c = 0; c < kVectors; ++c) acc[r][c] = fma(w, values[c], acc[r][c]);
    }
  }
#pragma GCC unroll 16
  for (index_t r = 0; r < kR; ++r)
#pragma GCC unroll 16
    for (index_t c = 0; c < kVectors; ++c) acc[r][c].store_aligned(o + r * o_stride + c * kW);
}

}  // namespace detail

/// accumulate_values (simd/value_accumulate.hpp) for value rows of element type E (float,
/// bfloat16, float16 or q8_0_block), widened in registers: O[r][:] = alpha[r] O[r][:] +
/// sum_{j < keys} P[r][j] V[j][:] for r < rows (a multiple of kValueRowBlock) over
/// value_vectors whole vectors, which every row of V must hold (its value dim a multiple of
/// the vector width). `v` points at the first row, rows v_stride elements apart. Groups of
/// kWidenedValueKeys keys outermost, then vector blocks, row blocks, keys: the accumulators
/// make a round trip through L1 per group, the V rows stay there. Row j of `ahead` is
/// prefetched before the first block reads key j (one row requested per row consumed).
template <class E, ZeroWeights kZero>
void accumulate_widened_values(float* o, index_t o_stride, const float* alpha, const float* p, index_t p_stride,
                               const E* v, index_t v_stride, index_t rows, index_t keys, index_t value_vectors,
                               const RowPrefetch<E>& ahead = {}) {
  static_assert(kValueRowBlock % kWidenedValueRows<E> == 0, "rows come in multiples of kValueRowBlock");
  constexpr index_t kW = static_cast<index_t>(kWidth<float>);
  for (index_t j0 = 0; j0 == 0 || j0 < keys; j0 += kWidenedValueKeys) {  // keys = 0 still rescales
    const index_t count = std::min(kWidenedValueKeys, keys - j0);
    const RowPrefetch<E> group_ahead = ahead.from(j0);
    const float* group_alpha = j0 == 0 ? alpha : nullptr;
    index_t c0 = 0;
    const auto blocks = [&]<index_t kVectors>(std::integral_constant<index_t, kVectors>) {
      for (index_t r0 = 0; r0 < rows; r0 += kWidenedValueRows<E>) {
        detail::accumulate_widened_block<kVectors, kZero>(o + r0 * o_stride + c0 * kW, o_stride,
                                                          group_alpha == nullptr ? nullptr : group_alpha + r0,
                                                          p + r0 * p_stride + j0, p_stride, v + j0 * v_stride, v_stride,
                                                          c0 * kW, count, c0 == 0 && r0 == 0 ? &group_ahead : nullptr);
      }
    };
    for (; c0 + kWidenedValueVectors<E> <= value_vectors; c0 += kWidenedValueVectors<E>)
      blocks(std::integral_constant<index_t, kWidenedValueVectors<E>>{});
    for (; c0 < value_vectors; ++c0) blocks(std::integral_constant<index_t, 1>{});
  }
}

}  // namespace attnkit::simd
