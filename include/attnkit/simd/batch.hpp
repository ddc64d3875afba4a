#pragma once
// The SIMD vocabulary of attnkit: the xsimd batch of the build's widest instruction set.
// Only headers under simd/ include xsimd; everything else sees these aliases and functions.

#include <cstddef>
#include <type_traits>

// xsimd 8.1's double-precision sin/cos range reduction (math/xsimd_rem_pio2.hpp, fdlibm's
// __kernel_rem_pio2) trips GCC 12's -Wmaybe-uninitialized once inlined into an
// AddressSanitizer build (GCC cannot follow the loop bounds that fill fq[] before it is read,
// as fdlibm does); the warning is located in that header, so it is silenced for xsimd's
// headers only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <xsimd/xsimd.hpp>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "attnkit/core/index.hpp"

namespace attnkit::simd {

/// xsimd batch of the widest instruction set enabled at compile time (AVX-512 with
/// -march=native on this project's machines; SSE2 for a plain x86-64 build).
template <class T>
using Batch = xsimd::batch<T>;

/// Lanes of Batch<T>.
template <class T>
inline constexpr std::size_t kWidth = Batch<T>::size;

/// Vector registers a micro-kernel may fill: 32 with AVX-512 (zmm0-31), 16 with SSE/AVX.
template <class T>
inline constexpr index_t kVectorRegisters = sizeof(Batch<T>) == 64 ? 32 : 16;

/// a * b + c with one rounding wherever the instruction set has FMA. xsimd 8.1 has no AVX-512
/// fma kernel and computes a * b + c, which becomes one instruction only when the compiler
/// contracts it (GCC does by default at -O2/-O3, but not in the sanitizer build, whose
/// scores then differed in the last bit); the intrinsic makes every build of one instruction
/// set round the same way.
template <class T>
Batch<T> fma(const Batch<T>& a, const Batch<T>& b, const Batch<T>& c) {
#if defined(__AVX512F__)
  if constexpr (sizeof(Batch<T>) == 64 && std::is_same_v<T, float>) return Batch<T>(_mm512_fmadd_ps(a, b, c));
  if constexpr (sizeof(Batch<T>) == 64 && std::is_same_v<T, double>) return Batch<T>(_mm512_fmadd_pd(a, b, c));
#endif
  return xsimd::fma(a, b, c);
}

/// sums[e] = the sum of the lanes of acc[e] for e < kCount, up to one vector's worth of float
/// accumulators, by one parallel reduction (xsimd::haddp; missing accumulators count as zeros).
/// xsimd 8.1's 512-bit haddp returns these sums permuted (lanes 0 1 4 5 2 3 6 7 8 9 12 13 10
/// 11 14 15, measured on AVX-512; its 256-bit one is right), so with AVX-512 each accumulator
/// is folded to 256 bits (its halves added) and the folded ones reduced eight at a time by the
/// 256-bit haddp. Use this, never haddp itself. `sums` holds kWidth<float> floats.
template <std::size_t kCount>
inline void lane_sums(const Batch<float> (&acc)[kCount], float* sums) {
  static_assert(kCount >= 1 && kCount <= kWidth<float>, "at most one vector of accumulators");
#if defined(__AVX512F__)
  if constexpr (sizeof(Batch<float>) == 64) {
    using Half = xsimd::batch<float, xsimd::avx2>;
    constexpr std::size_t kHalf = Half::size;
    for (std::size_t first = 0; first < kCount; first += kHalf) {
      Half folded[kHalf];
      for (std::size_t e = 0; e < kHalf; ++e) {
        if (first + e >= kCount) {
          folded[e] = Half(0.0f);
          continue;
        }
        const __m512 x = acc[first + e].data;
        folded[e] =
            Half(_mm512_castps512_ps256(x)) + Half(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)));
      }
      xsimd::haddp(folded).store_unaligned(sums + first);
    }
    return;
  }
#endif
  Batch<float> full[kWidth<float>];
  for (std::size_t e = 0; e < kWidth<float>; ++e) full[e] = e < kCount ? acc[e] : Batch<float>(0.0f);
  xsimd::haddp(full).store_unaligned(sums);
}

/// Keeps an already loaded batch in a register. Micro-kernels load a vector once and use it
/// for several FMAs; GCC otherwise folds the load into every one of those FMAs as a memory
/// operand, so the kernel issues a load per FMA and becomes load-port bound. An empty asm
/// with a register operand ("+v": any SIMD register) makes the value opaque, so it is loaded
/// exactly once. No instruction is emitted.
template <class T>
inline void keep_in_register(Batch<T>& value) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  asm("" : "+v"(value.data));
#else
  (void)value;
#endif
}

/// Name of the instruction set Batch<T> compiles to ("avx512bw", "sse2", ...).
inline const char* arch_name() { return xsimd::default_arch::name(); }

}  // namespace attnkit::simd
