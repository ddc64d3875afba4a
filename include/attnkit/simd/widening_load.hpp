#pragma once
// One vector of a cache row as floats, widened in registers: float, bfloat16, float16 or
// 8-bit blocks (q8_0_block). Decode reads every cache byte once, so rows are converted where
// they are consumed instead of through a float copy.

#include <cstring>
#include <type_traits>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "attnkit/core/half.hpp"
#include "attnkit/core/index.hpp"
#include "attnkit/core/q8_block.hpp"
#include "attnkit/simd/batch.hpp"
#include "attnkit/simd/convert.hpp"

namespace attnkit::simd {

namespace detail {
/// Half values lane by lane through core/half.hpp's conversions (targets without the instruction).
template <class E>
Batch<float> load_widened_lanes(const E* row, index_t d) {
  alignas(64) float lanes[kWidth<float>];
  for (std::size_t l = 0; l < kWidth<float>; ++l) {
    lanes[l] = widen(row[d + static_cast<index_t>(l)]);
  }
  return Batch<float>::load_aligned(lanes);
}
}  // namespace detail

/// The int8 values row[d .. d + kWidth<float>) of a row of 8-bit blocks as floats, before
/// their block's scale (load_widened multiplies by it; kernels that take several vectors of
/// one block convert the scale once). `row` points at the row's first block, d counts values
/// (a multiple of the vector width, so one vector never straddles two blocks).
inline Batch<float> load_q8_values(const q8_0_block* row, index_t d) {
  static_assert(q8_0_block::kValues % kWidth<float> == 0, "a vector lies inside one block");
  [[maybe_unused]] const std::int8_t* values = row[d / q8_0_block::kValues].values + d % q8_0_block::kValues;
#if defined(__AVX512F__)
  return Batch<float>(
      _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(values)))));
#elif defined(__AVX2__)
  return Batch<float>(
      _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(values)))));
#elif defined(__SSE4_1__) && !defined(__AVX__)
  std::int32_t packed;
  std::memcpy(&packed, values, sizeof(packed));
  return Batch<float>(_mm_cvtepi32_ps(_mm_cvtepi8_epi32(_mm_cvtsi32_si128(packed))));
#else
  alignas(64) float lanes[kWidth<float>];
  for (std::size_t l = 0; l < kWidth<float>; ++l) lanes[l] = static_cast<float>(values[l]);
  return Batch<float>::load_aligned(lanes);
#endif
}

/// The scale of the 8-bit block holding value d of a row, in every lane.
inline Batch<float> q8_scale(const q8_0_block* row, index_t d) {
  return Batch<float>(to_float(row[d / q8_0_block::kValues].scale));
}

/// Values row[d .. d + kWidth<float>) of a row of element type E as floats, exactly: a load for
/// float; bfloat16 by a 16-bit shift; float16 by vcvtph2ps; an 8-bit block's int8 values
/// sign-extended, converted and multiplied by its float16 scale (d * q is exact in float). For
/// q8_0_block, `row` points at the row's first block and d counts values (a multiple of the
/// vector width, so one vector never straddles two blocks).
template <class E>
Batch<float> load_widened(const E* row, index_t d) {
  // One branch per instruction set, chosen by the preprocessor as Batch<float> is: 16 lanes
  // with AVX-512, 8 with AVX (integer widening needs AVX2), 4 with SSE.
  if constexpr (std::is_same_v<E, float>) {
    return Batch<float>::load_unaligned(row + d);
  } else if constexpr (std::is_same_v<E, bfloat16>) {
#if defined(__AVX512F__)
    const __m512i bits = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + d)));
    return Batch<float>(_mm512_castsi512_ps(_mm512_slli_epi32(bits, 16)));
#elif defined(__AVX2__)
    const __m256i bits = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + d)));
    return Batch<float>(_mm256_castsi256_ps(_mm256_slli_epi32(bits, 16)));
#elif defined(__SSE2__) && !defined(__AVX__)
    const __m128i bits = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + d));
    return Batch<float>(_mm_castsi128_ps(_mm_unpacklo_epi16(_mm_setzero_si128(), bits)));
#else
    return detail::load_widened_lanes(row, d);
#endif
  } else if constexpr (std::is_same_v<E, float16>) {
#if defined(__AVX512F__)
    return Batch<float>(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + d))));
#elif defined(__F16C__)
    return Batch<float>(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + d))));
#else
    return detail::load_widened_lanes(row, d);
#endif
  } else {
    static_assert(std::is_same_v<E, q8_0_block>, "cache rows hold float, bfloat16, float16 or q8_0_block");
    return load_q8_values(row, d) * q8_scale(row, d);
  }
}

/// kCount consecutive vectors of a row of E from value d on, as floats (load_widened each), for
/// micro-kernels that use each vector in several FMAs. 8-bit blocks convert their scale once
/// per block, so for them d must be a multiple of 32 unless the kCount vectors lie in one
/// block. Float vectors are kept in registers (keep_in_register: else GCC reloads each as an
/// operand of every FMA); widened ones are anyway, and keep_in_register on them made GCC store
/// the array. Float and half rows are addressed from one pointer at value d: with an offset
/// per vector GCC kept the offsets on the stack and reloaded them for every row.
template <index_t kCount, class E>
[[gnu::always_inline]] inline void load_widened_vectors(const E* row, index_t d, Batch<float> (&vectors)[kCount]) {
  constexpr index_t kW = static_cast<index_t>(kWidth<float>);
  if constexpr (std::is_same_v<E, q8_0_block>) {
    Batch<float> scale;
#pragma GCC unroll 16
    for (index_t c = 0; c < kCount; ++c) {
      if (c * kW % static_cast<index_t>(q8_0_block::kValues) == 0) scale = q8_scale(row, d + c * kW);
      vectors[c] = load_q8_values(row, d + c * kW) * scale;
    }
  } else {
    const E* at = row + d;
#pragma GCC unroll 16
    for (index_t c = 0; c < kCount; ++c) {
      vectors[c] = load_widened(at, c * kW);
      if constexpr (std::is_same_v<E, float>) keep_in_register(vectors[c]);
    }
  }
}

/// dst[0 .. n) = the first n values of a row of element type E as floats (n a multiple of 32
/// for q8_0_block): simd::widen_row for float and the half types, load_widened block by block
/// for 8-bit blocks.
template <class E>
void widen_values(const E* row, index_t n, float* dst) {
  if constexpr (std::is_same_v<E, q8_0_block>) {
    constexpr index_t kW = static_cast<index_t>(kWidth<float>);
    for (index_t d = 0; d < n; d += kW) load_widened(row, d).store_unaligned(dst + d);
  } else {
    widen_row(row, n, dst);
  }
}

}  // namespace attnkit::simd
