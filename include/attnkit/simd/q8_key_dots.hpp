#pragma once
// Scores of query rows quantized to 8-bit blocks against the keys of an 8-bit cache, as integer
// dot products (the 8-bit query mode, SPEC.md section 13): per block c of 32 values,
// score += dk_c * (dq_c * sum_i q_ci k_ci), the inner sum exact in int32, the rest in float.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
#include <immintrin.h>
#endif

#include "attnkit/core/half.hpp"
#include "attnkit/core/index.hpp"
#include "attnkit/core/q8_block.hpp"
#include "attnkit/simd/prefetch.hpp"

namespace attnkit::simd {

/// Query rows quantized to 8-bit blocks: row r's block c at blocks[r * blocks_per_row + c];
/// scales[r * blocks_per_row + c] = to_float(that block's scale) times any factor the caller
/// applies to the score (decode: sigma log2 e, after the integer product, never to q before
/// quantizing); offsets[...] = -128 times the sum of the block's values (the AVX512-VNNI kernel
/// reads the keys as unsigned bytes k + 128 and adds this to cancel the 128 sum q it adds).
struct Q8Queries {
  const q8_0_block* blocks = nullptr;
  const float* scales = nullptr;
  const std::int32_t* offsets = nullptr;
  index_t blocks_per_row = 0;

  /// Whether there are rows (the mode is on).
  bool active() const { return blocks != nullptr; }
  /// The rows from row r on.
  Q8Queries from(index_t r) const {
    const index_t at = r * blocks_per_row;
    return {blocks + at, scales + at, offsets + at, blocks_per_row};
  }
};

namespace detail {

/// The exact integer dot product of two blocks' values.
inline std::int32_t q8_block_dot(const q8_0_block& a, const q8_0_block& b) {
  std::int32_t sum = 0;
  for (index_t i = 0; i < q8_0_block::kValues; ++i)
    sum += static_cast<std::int32_t>(a.values[i]) * static_cast<std::int32_t>(b.values[i]);
  return sum;
}

/// fma(a, b, c) where the target has the instruction, else a * b + c (std::fma without it is a
/// library call emulating the single rounding, tens of nanoseconds each).
inline float fused_multiply_add(float a, float b, float c) {
#if defined(__FMA__)
  return std::fma(a, b, c);
#else
  return a * b + c;
#endif
}

/// q8_key_dots key by key, for any instruction set: per key and row, over blocks c in order,
/// score = fma(dk_c, dq_c * isum_c, score) from 0, the operations (and so the bits) of the
/// AVX512-VNNI kernel below (where the target has FMA).
inline void q8_key_dots_portable(const Q8Queries& queries, index_t rows, const q8_0_block* keys, index_t key_stride,
                                 index_t count, index_t blocks, float* scores, index_t score_stride) {
  for (index_t k = 0; k < count; ++k) {
    const q8_0_block* key = keys + k * key_stride;
    for (index_t r = 0; r < rows; ++r) {
      float score = 0.0f;
      for (index_t c = 0; c < blocks; ++c) {
        const index_t at = r * queries.blocks_per_row + c;
        const float product = queries.scales[at] * static_cast<float>(q8_block_dot(queries.blocks[at], key[c]));
        score = fused_multiply_add(to_float(key[c].scale), product, score);
      }
      scores[r * score_stride + k] = score;
    }
  }
}

#if defined(__AVX512VNNI__) && defined(__AVX512BW__)

/// Keys of one tile of the AVX512-VNNI kernel: one per float lane.
inline constexpr index_t kQ8TileKeys = 16;

/// t[j] = dword j (values 4j .. 4j + 3) of block c of each of the tile's `present` keys, key k
/// in lane k, as unsigned bytes (value + 128; lanes of absent keys 0x80 bytes, whose products
/// are dropped with the lanes): the 16 x 8 dword transpose vpdpbusd needs to take one query
/// dword against 16 keys. Keys k and k + 8 share a register (low and high 256 bits), then
/// dwords, quadwords and 128-bit lanes are interleaved: 8 loads, 8 inserts, 24 shuffles.
[[gnu::always_inline]] inline void transpose_q8_block(const q8_0_block* keys, index_t key_stride, index_t c,
                                                      index_t present, __m512i (&t)[8]) {
  const auto values = [&](index_t k) {
    return k < present ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(keys[k * key_stride + c].values))
                       : _mm256_setzero_si256();
  };
  const __m512i sign = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512i rows[8];
  for (index_t i = 0; i < 8; ++i)
    rows[i] = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(values(i)), values(i + 8), 1), sign);
  __m512i pairs[8], quads[8];
  for (index_t i = 0; i < 8; i += 2) {
    pairs[i] = _mm512_unpacklo_epi32(rows[i], rows[i + 1]);      // lane: d0 of i, i+1, d1 of i, i+1
    pairs[i + 1] = _mm512_unpackhi_epi32(rows[i], rows[i + 1]);  // d2, d3
  }
  for (index_t i = 0; i < 8; i += 4) {
    quads[i] = _mm512_unpacklo_epi64(pairs[i], pairs[i + 2]);      // lane: d0 of keys i .. i+3
    quads[i + 1] = _mm512_unpackhi_epi64(pairs[i], pairs[i + 2]);  // d1
    quads[i + 2] = _mm512_unpacklo_epi64(pairs[i + 1], pairs[i + 3]);
    quads[i + 3] = _mm512_unpackhi_epi64(pairs[i + 1], pairs[i + 3]);
  }
  // quads[s] (keys 0-3) and quads[4 + s] (keys 4-7): 128-bit lane 0 dword s of keys 0-3 (4-7),
  // lane 1 dword s + 4, lanes 2 and 3 the same for keys 8-11 (12-15).
  const __m512i low = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13), high = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
  for (index_t s = 0; s < 4; ++s) {
    t[s] = _mm512_permutex2var_epi64(quads[s], low, quads[4 + s]);
    t[s + 4] = _mm512_permutex2var_epi64(quads[s], high, quads[4 + s]);
  }
}

/// Scores of every row against one tile of `present` (<= 16) keys, lane k key k: per block,
/// the keys transposed once (transpose_q8_block), their scales widened, then per row 8
/// vpdpbusd from the row's offset (so the int32 lanes hold the exact isum), converted, times
/// dq, fused-multiply-added with dk into the row's scores (kept in `scores` between blocks).
/// The scales are copied to the stack by scalar loads and stores: a vpgatherdd per block took
/// a quarter of the kernel's time (Intel Xeon family 6 model 106, perf samples).
inline void q8_key_dots_tile(const Q8Queries& queries, index_t rows, const q8_0_block* keys, index_t key_stride,
                             index_t present, index_t blocks, float* scores, index_t score_stride) {
  const __mmask16 lanes = static_cast<__mmask16>((1u << present) - 1u);
  for (index_t c = 0; c < blocks; ++c) {
    __m512i t[8];
    transpose_q8_block(keys, key_stride, c, present, t);
    alignas(32) std::uint16_t scale_bits[kQ8TileKeys] = {};
    for (index_t k = 0; k < present; ++k) scale_bits[k] = keys[k * key_stride + c].scale.bits;
    const __m512 dk = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(scale_bits)));
    for (index_t r = 0; r < rows; ++r) {
      const index_t at = r * queries.blocks_per_row + c;
      const std::int8_t* q = queries.blocks[at].values;
      __m512i acc = _mm512_set1_epi32(queries.offsets[at]);
      for (index_t j = 0; j < 8; ++j) {
        std::int32_t dword;
        std::memcpy(&dword, q + 4 * j, sizeof(dword));
        acc = _mm512_dpbusd_epi32(acc, t[j], _mm512_set1_epi32(dword));
      }
      const __m512 product = _mm512_mul_ps(_mm512_cvtepi32_ps(acc), _mm512_set1_ps(queries.scales[at]));
      float* row = scores + r * score_stride;
      const __m512 before = c == 0 ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(lanes, row);
      _mm512_mask_storeu_ps(row, lanes, _mm512_fmadd_ps(dk, product, before));
    }
  }
}

#endif

}  // namespace detail

/// Whether q8_key_dots runs integer dot products in vectors (AVX512-VNNI) in this build; else
/// it runs detail::q8_key_dots_portable (the same bits, key by key).
inline constexpr bool kQ8VectorDots =
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
    true;
#else
    false;
#endif

/// scores[r * score_stride + k] = sum over blocks c of dk_c * (dq_c * sum_i q_rci k_kci) for
/// rows r < rows (queries) and keys k < count: keys of head_dim values (a multiple of 32) in
/// 8-bit blocks, key_stride blocks apart. Row c of `ahead` is prefetched as key c is read.
/// With AVX512-VNNI 16 keys at a time (detail::q8_key_dots_tile), else key by key; the same
/// bits either way.
inline void q8_key_dots(const Q8Queries& queries, index_t rows, const q8_0_block* keys, index_t key_stride,
                        index_t count, index_t head_dim, float* scores, index_t score_stride,
                        const RowPrefetch<q8_0_block>& ahead = {}) {
  const index_t blocks = head_dim / q8_0_block::kValues;
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
  constexpr index_t kTile = detail::kQ8TileKeys;
  for (index_t k = 0; k < count; k += kTile) {
    ahead.rows(k, k + kTile);
    detail::q8_key_dots_tile(queries, rows, keys + k * key_stride, key_stride, std::min(kTile, count - k), blocks,
                             scores + k, score_stride);
  }
#else
  for (index_t k = 0; k < count; ++k) ahead.row(k);
  detail::q8_key_dots_portable(queries, rows, keys, key_stride, count, blocks, scores, score_stride);
#endif
}

}  // namespace attnkit::simd
