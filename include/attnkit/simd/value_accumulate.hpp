#pragma once
// Register-blocked micro-kernel for the online-softmax update O~ = alpha O~ + P V_tile.

#include <algorithm>
#include <type_traits>

#include "attnkit/core/index.hpp"
#include "attnkit/simd/batch.hpp"

namespace attnkit::simd {

/// Rows of O per register block; callers pad query tiles to a multiple of it.
inline constexpr index_t kValueRowBlock = 4;
/// Most vectors of the value dimension held per register block.
inline constexpr index_t kValueVectorBlock = 4;
/// Bytes of V rows in one key chunk of accumulate_values: 16 KiB, half the smallest L1 of the
/// project's machines (AMD's 32 KiB), leaving room for the weights and the accumulators.
inline constexpr index_t kValueChunkBytes = 16 * 1024;

/// Keys per chunk of accumulate_values: value rows of value_vectors vectors filling
/// kValueChunkBytes (64 keys for Dv = 64 in float, 32 for Dv = 128), at least one vector.
template <class T>
constexpr index_t value_key_chunk(index_t value_vectors) {
  const index_t row_bytes = std::max(index_t{1}, value_vectors) * static_cast<index_t>(sizeof(Batch<T>));
  return std::max(static_cast<index_t>(kWidth<T>), kValueChunkBytes / row_bytes);
}

/// How masked-out weights are treated by accumulate_values.
enum class ZeroWeights {
  kMultiply,  ///< 0 * v is computed: exact whenever the V rows of the tile are finite.
  kSkip,      ///< terms with weight 0 are not evaluated, so a NaN/Inf row the mask excludes
              ///< cannot reach the output (SPEC.md section 0: select, do not multiply).
};

namespace detail {

/// One [kValueRowBlock x kVectors * width] block of O over `keys` keys. alpha nullptr: O is
/// taken as it is (a rescale of exactly 1).
template <class T, index_t kVectors, ZeroWeights kZero>
void accumulate_value_block(T* o, index_t o_stride, const T* alpha, const T* p, index_t p_stride, const T* v,
                            index_t v_stride, index_t keys) {
  constexpr index_t kW = static_cast<index_t>(kWidth<T>);
  constexpr index_t kR = kValueRowBlock;
  Batch<T> acc[kR][kVectors];
#pragma GCC unroll 16
  for (index_t r = 0; r < kR; ++r) {
#pragma GCC unroll 16
    for (index_t c = 0; c < kVectors; ++c) acc[r][c] = Batch<T>::load_aligned(o + r * o_stride + c * kW);
    if (alpha == nullptr) continue;
    const Batch<T> rescale(alpha[r]);
#pragma GCC unroll 16
    for (index_t c = 0; c < kVectors; ++c) acc[r][c] *= rescale;
  }
  for (index_t j = 0; j < keys; ++j) {
    Batch<T> values[kVectors];
#pragma GCC unroll 16
    for (index_t c = 0; c < kVectors; ++c) {
      values[c] = Batch<T>::load_unaligned(v + j * v_stride + c * kW);
      keep_in_register(values[c]);
    }
#pragma GCC unroll 16
    for (index_t r = 0; r < kR; ++r) {
      const T weight = p[r * p_stride + j];
      if constexpr (kZero == ZeroWeights::kSkip) {
        if (weight == T(0)) continue;
      }
      const Batch<T> w(weight);
#pragma GCC unroll 16
      for (index_t c = 0; c < kVectors; ++c) acc[r][c] = simd::fma(w, values[c], acc[r][c]);
    }
  }
#pragma GCC unroll 16
  for (index_t r = 0; r < kR; ++r)
#pragma GCC unroll 16
    for (index_t c = 0; c < kVectors; ++c) acc[r][c].store_aligned(o + r * o_stride + c * kW);
}

/// Whether a tail of 1 or 2 vectors joins the last full block of value vectors (blocks of 5
/// or 6): 4 rows x 6 vectors of accumulators, 6 values and one weight need 31 registers, so
/// AVX-512's 32 hold them. A 4 x 1 or 4 x 2 block does 1-2 FMAs per load (Dv = 80 or 96 in
/// float: a fifth or a third of the value FLOP).
template <class T>
inline constexpr bool kWideValueTails = kVectorRegisters<T> >= kValueRowBlock * 6 + 6 + 1;

/// accumulate_values over one chunk of keys: row blocks outer, blocks of value vectors inner.
template <class T, ZeroWeights kZero>
void accumulate_value_rows(T* o, index_t o_stride, const T* alpha, const T* p, index_t p_stride, const T* v,
                           index_t v_stride, index_t rows, index_t keys, index_t value_vectors) {
  constexpr index_t kW = static_cast<index_t>(kWidth<T>);
  const index_t tail = value_vectors % kValueVectorBlock;
  const bool widen = kWideValueTails<T> && value_vectors > kValueVectorBlock && (tail == 1 || tail == 2);
  // Vectors in blocks of kValueVectorBlock, then the rest (1 - 3, or 5 - 6 when widened) in one
  // last block.
  const index_t last = widen ? tail + kValueVectorBlock : tail;
  for (index_t r0 = 0; r0 < rows; r0 += kValueRowBlock) {
    T* o_rows = o + r0 * o_stride;
    const T* p_rows = p + r0 * p_stride;
    const T* alpha_rows = alpha == nullptr ? nullptr : alpha + r0;
    index_t c0 = 0;
    for (; c0 + last < value_vectors; c0 += kValueVectorBlock) {
      accumulate_value_block<T, kValueVectorBlock, kZero>(o_rows + c0 * kW, o_stride, alpha_rows, p_rows, p_stride,
                                                          v + c0 * kW, v_stride, keys);
    }
    const auto block = [&]<index_t kVectors>(std::integral_constant<index_t, kVectors>) {
      accumulate_value_block<T, kVectors, kZero>(o_rows + c0 * kW, o_stride, alpha_rows, p_rows, p_stride, v + c0 * kW,
                                                 v_stride, keys);
    };
    switch (value_vectors - c0) {
      case 6:
        if constexpr (kWideValueTails<T>) block(std::integral_constant<index_t, 6>{});
        break;
      case 5:
        if constexpr (kWideValueTails<T>) block(std::integral_constant<index_t, 5>{});
        break;
      case 3:
        block(std::integral_constant<index_t, 3>{});
        break;
      case 2:
        block(std::integral_constant<index_t, 2>{});
        break;
      case 1:
        block(std::integral_constant<index_t, 1>{});
        break;
      default:
        break;
    }
  }
}

}  // namespace detail

/// O[r][:] = alpha[r] * O[r][:] + sum_{j < keys} P[r][j] * V[j][:] for r < rows (rounded up to
/// kValueRowBlock) over value_vectors vectors of the value dimension.
///   o:     [rows x o_stride] accumulators, aligned, o_stride >= value_vectors * kWidth<T>
///   alpha: [rows] per-row rescale exp2(m_old - m_new) of the online softmax, or nullptr for
///          none (exactly 1: a later key segment of the same scores)
///   p:     [rows x p_stride] unnormalised weights
///   v:     [keys x v_stride] value rows (no alignment needed), value_vectors whole vectors
///          readable per row, zero or unread beyond the real value dim
/// Keys go in chunks of value_key_chunk, every row block taking a chunk before the next one:
/// a chunk's V rows stay in L1 for all the rows, where a whole 256-key tile (64 KiB for
/// Dv = 64) streamed from L2 once per 4-row block, 0.5 byte per FLOP (docs/notes/prefill-fma-peak.md,
/// "Bytes per FLOP"). Each output element still sums its keys in order: the same result.
template <class T, ZeroWeights kZero>
void accumulate_values(T* o, index_t o_stride, const T* alpha, const T* p, index_t p_stride, const T* v,
                       index_t v_stride, index_t rows, index_t keys, index_t value_vectors) {
  const index_t chunk = value_key_chunk<T>(value_vectors);
  for (index_t j0 = 0; j0 == 0 || j0 < keys; j0 += chunk) {  // one chunk at least: keys = 0 still rescales
    detail::accumulate_value_rows<T, kZero>(o, o_stride, j0 == 0 ? alpha : nullptr, p + j0, p_stride, v + j0 * v_stride,
                                            v_stride, rows, std::min(chunk, keys - j0), value_vectors);
  }
}

}  // namespace attnkit::simd
