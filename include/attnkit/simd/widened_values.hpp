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

/// Vectors of the value dimension per register block: 4 rows x 2 vectors of accumulators,
/// 2 values and a weight fit AVX2's 16 registers (the prefill kernel's 4 x 4 block spills
/// there); AVX-512's 32 hold 4 x 4.
inline constexpr index_t kWidenedValueVectors = kVectorRegisters<float> >= 32 ? 4 : 2;

/// Keys per group: every vector block of the accumulators takes a group of keys before the next
/// group, so the group's V rows (8 rows, 4 KiB of float at Dv = 128) are read from L1 by every
/// pass. One pass per vector block over all of a block's 64 rows instead read each row's next
/// 32 bytes 512 bytes apart, which mapped to 8 of L1's 64 sets and missed (a float cache ran at
/// half the speed of the prefill kernel's loop).
inline constexpr index_t kWidenedValueKeys = 8;

namespace detail {

/// One block of kValueRowBlock rows x kVectors vectors of O over `keys` keys (inlined: called
/// per group of 8 keys, a call's prologue and spills cost as much as its FMAs).
template <index_t kVectors, ZeroWeights kZero, class E>
[[gnu::always_inline]] inline void accumulate_widened_block(float* o, index_t o_stride, const float* alpha,
                                                            const float* p, index_t p_stride, const E* v,
                                                            index_t v_stride, index_t first_value, index_t keys) {
  constexpr index_t kW = static_cast<index_t>(kWidth<float>);
  constexpr index_t kR = kValueRowBlock;
  Batch<float> acc[kR][kVectors];
  for (index_t r = 0; r < kR; ++r) {
    for (index_t c = 0; c < kVectors; ++c) acc[r][c] = Batch<float>::load_aligned(o + r * o_stride + c * kW);
    if (alpha == nullptr) continue;
    const Batch<float> rescale(alpha[r]);
    for (index_t c = 0; c < kVectors; ++c) acc[r][c] *= rescale;
  }
  for (index_t j = 0; j < keys; ++j) {
    Batch<float> values[kVectors];
    if constexpr (std::is_same_v<E, q8_0_block>) {
      // An 8-bit block's scale converted once for its vectors: first_value is a multiple of
      // kVectors vectors (of a block when they are more), so vector c lies in block
      // first_value / 32 + c * width / 32.
      constexpr index_t kBlock = q8_0_block::kValues;
      Batch<float> scale;
      for (index_t c = 0; c < kVectors; ++c) {
        if (c * kW % kBlock == 0) scale = q8_scale(v + j * v_stride, first_value + c * kW);
        values[c] = load_q8_values(v + j * v_stride, first_value + c * kW) * scale;
      }
    } else {
      for (index_t c = 0; c < kVectors; ++c) {
        values[c] = load_widened(v + j * v_stride, first_value + c * kW);
        // A float row is kept in a register (else GCC reloads it as an operand of every FMA);
        // a widened one is anyway, and keep_in_register on the array made GCC store it.
        if constexpr (std::is_same_v<E, float>) keep_in_register(values[c]);
      }
    }
    for (index_t r = 0; r < kR; ++r) {
      const float weight = p[r * p_stride + j];
      if constexpr (kZero == ZeroWeights::kSkip) {
        if (weight == 0.0f) continue;
      }
      const Batch<float> w(weight);
      for (index_t c = 0; c < kVectors; ++c) acc[r][c] = fma(w, values[c], acc[r][c]);
    }
  }
  for (index_t r = 0; r < kR; ++r)
    for (index_t c = 0; c < kVectors; ++c) acc[r][c].store_aligned(o + r * o_stride + c * kW);
}

}  // namespace detail

/// accumulate_values (simd/value_accumulate.hpp) for value rows of element type E (float,
/// bfloat16, float16 or q8_0_block), widened in registers: O[r][:] = alpha[r] O[r][:] +
/// sum_{j < keys} P[r][j] V[j][:] for r < rows (a multiple of kValueRowBlock) over
/// value_vectors whole vectors, which every row of V must hold (its value dim a multiple of
/// the vector width). `v` points at the first row, rows v_stride elements apart. Groups of
/// kWidenedValueKeys keys outermost, then vector blocks, row blocks, keys: the accumulators
/// make a round trip through L1 per group, the V rows stay there. Before each group, the
/// group's share of `ahead`'s rows is prefetched (as many rows per group as keys).
template <class E, ZeroWeights kZero>
void accumulate_widened_values(float* o, index_t o_stride, const float* alpha, const float* p, index_t p_stride,
                               const E* v, index_t v_stride, index_t rows, index_t keys, index_t value_vectors,
                               const RowPrefetch<E>& ahead = {}) {
  constexpr index_t kW = static_cast<index_t>(kWidth<float>);
  for (index_t j0 = 0; j0 == 0 || j0 < keys; j0 += kWidenedValueKeys) {  // keys = 0 still rescales
    const index_t count = std::min(kWidenedValueKeys, keys - j0);
    ahead.rows(j0, j0 + kWidenedValueKeys);
    const float* group_alpha = j0 == 0 ? alpha : nullptr;
    index_t c0 = 0;
    const auto blocks = [&]<index_t kVectors>(std::integral_constant<index_t, kVectors>) {
      for (index_t r0 = 0; r0 < rows; r0 += kValueRowBlock) {
        detail::accumulate_widened_block<kVectors, kZero>(
            o + r0 * o_stride + c0 * kW, o_stride, group_alpha == nullptr ? nullptr : group_alpha + r0,
            p + r0 * p_stride + j0, p_stride, v + j0 * v_stride, v_stride, c0 * kW, count);
      }
    };
    for (; c0 + kWidenedValueVectors <= value_vectors; c0 += kWidenedValueVectors)
      blocks(std::integral_constant<index_t, kWidenedValueVectors>{});
    for (; c0 < value_vectors; ++c0) blocks(std::integral_constant<index_t, 1>{});
  }
}

}  // namespace attnkit::simd
