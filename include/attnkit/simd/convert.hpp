#pragma once
// Rows of half-precision elements widened to float, and float rows narrowed to them, in
// vectors where the instruction set converts (the tiled driver widens K and V while packing
// them, core/half.hpp converts single values).

#include <cstring>
#include <type_traits>

#if defined(__SSE2__) || defined(__F16C__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "attnkit/core/half.hpp"
#include "attnkit/core/index.hpp"

namespace attnkit::simd {

/// dst[0 .. n) = src[0 .. n) as T: exact widening of bfloat16 or float16 to float, or a copy
/// when S is T. bfloat16 widens by a 16-bit shift (AVX-512: 16 per step; AVX2: 8; SSE2: 4 by
/// interleaving zeros below the bits); float16 by F16C's vcvtph2ps (8 per step, 16 with
/// AVX-512) or, without F16C, value by value (core/half.hpp, bit-identical).
template <class T, class S>
void widen_row(const S* src, index_t n, T* dst) {
  if constexpr (std::is_same_v<S, T>) {
    std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(T));
  } else {
    static_assert(std::is_same_v<T, float> && HalfType<S>, "half elements widen to float");
    index_t i = 0;
    if constexpr (std::is_same_v<S, bfloat16>) {
#if defined(__AVX512F__)
      for (; i + 16 <= n; i += 16) {
        const __m512i bits = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)));
        _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(_mm512_slli_epi32(bits, 16)));
      }
#elif defined(__AVX2__)
      for (; i + 8 <= n; i += 8) {
        const __m256i bits = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
        _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(bits, 16)));
      }
#elif defined(__SSE2__)
      for (; i + 4 <= n; i += 4) {
        const __m128i bits = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + i));
        _mm_storeu_ps(dst + i, _mm_castsi128_ps(_mm_unpacklo_epi16(_mm_setzero_si128(), bits)));
      }
#endif
    } else {
#if defined(__AVX512F__)
      for (; i + 16 <= n; i += 16) {
        _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))));
      }
#elif defined(__F16C__)
      for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
      }
#endif
    }
    for (; i < n; ++i) dst[i] = to_float(src[i]);
  }
}

/// dst[0 .. n) = src[0 .. n) stored as S (core/half.hpp's store_as: rounded to nearest even
/// for a half type; a copy when S is T). float16 narrows 8 at a time by F16C's vcvtps2ph
/// (the instruction to_float16 uses one value at a time); bfloat16 value by value. Output
/// rows only: O(Lq Dv) per call.
template <class S, class T>
void narrow_row(const T* src, index_t n, S* dst) {
  if constexpr (std::is_same_v<S, T>) {
    std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(T));
  } else {
    index_t i = 0;
#if defined(__F16C__)
    if constexpr (std::is_same_v<S, float16> && std::is_same_v<T, float>) {
      for (; i + 8 <= n; i += 8) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
      }
    }
#endif
    for (; i < n; ++i) dst[i] = store_as<S>(src[i]);
  }
}

}  // namespace attnkit::simd
