#pragma once
// The SIMD vocabulary of attnkit: the xsimd batch of the build's widest instruction set.
// Only headers under simd/ include xsimd; everything else sees these aliases and functions.

#include <array>
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

#if defined(__AVX512F__)
namespace detail {

// lane_sums on AVX-512 by a tree of shuffles. A lane's index has four bits; a level adds the
// two lanes of a pair that differ in one bit holding parts of the same sum, two vectors at a
// time (a pair of shuffles and an add for two vectors), and frees that bit to say which of the
// two vectors a sum came from. Levels in order, for vectors x and y:
//   0: 256-bit halves (shuffle_f32x4 0x44 / 0xEE): adds across bit 3, bit 3 := vector;
//   1: 128-bit chunks (shuffle_f32x4 0x88 / 0xDD): adds across bit 2, bit 2 := old bit 3,
//      bit 3 := vector;
//   2: floats (unpacklo_ps / unpackhi_ps): adds across bit 1, bit 1 := old bit 0,
//      bit 0 := vector;
//   3: float pairs (unpacklo_pd / unpackhi_pd): adds across bit 1, bit 1 := vector.
// 2^n accumulators go through levels 0 .. n-1, vector i paired with vector i + half; the one
// vector left adds its lanes across the bits still holding parts (a shuffle and an add each).
// One permute puts the sums in order: 46 instructions for 16 accumulators (decode's tiles of
// 4 query rows x 4 keys), 24 for 8 (its pairs of keys).

template <int kLevel>
inline __m512 add_pairs(__m512 x, __m512 y) {
  if constexpr (kLevel == 0) return _mm512_add_ps(_mm512_shuffle_f32x4(x, y, 0x44), _mm512_shuffle_f32x4(x, y, 0xEE));
  if constexpr (kLevel == 1) return _mm512_add_ps(_mm512_shuffle_f32x4(x, y, 0x88), _mm512_shuffle_f32x4(x, y, 0xDD));
  if constexpr (kLevel == 2) return _mm512_add_ps(_mm512_unpacklo_ps(x, y), _mm512_unpackhi_ps(x, y));
  if constexpr (kLevel == 3) {
    const __m512d a = _mm512_castps_pd(x), b = _mm512_castps_pd(y);
    return _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)), _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
  }
}

/// x plus x with lane bit kBit flipped.
template <int kBit>
inline __m512 add_across_bit(__m512 x) {
  if constexpr (kBit == 3) return _mm512_add_ps(x, _mm512_shuffle_f32x4(x, x, 0x4E));
  if constexpr (kBit == 2) return _mm512_add_ps(x, _mm512_shuffle_f32x4(x, x, 0xB1));
  if constexpr (kBit == 1) return _mm512_add_ps(x, _mm512_permute_ps(x, 0x4E));
  if constexpr (kBit == 0) return _mm512_add_ps(x, _mm512_permute_ps(x, 0xB1));
}

/// The lane where the tree of 2^kLevels accumulators leaves the sum of accumulator e.
constexpr int lane_sums_lane(int e, int levels) {
  constexpr int kParts = -1;  // a bit that still holds parts of a sum: 0 once they are added
  int bits[4] = {kParts, kParts, kParts, kParts};
  for (int level = 0; level < levels; ++level) {
    const int vector = (e >> (levels - 1 - level)) & 1;  // second of its pair
    if (level == 0) bits[3] = vector;
    if (level == 1) bits[2] = bits[3], bits[3] = vector;
    if (level == 2) bits[1] = bits[0], bits[0] = vector;
    if (level == 3) bits[1] = vector;
  }
  int lane = 0;
  for (int b = 0; b < 4; ++b) lane |= (bits[b] == kParts ? 0 : bits[b]) << b;
  return lane;
}

/// Level kLevel of the tree over the first 2^(kLevels - kLevel) vectors, halving them.
template <int kLevel, int kLevels>
inline void add_level(__m512* v) {
  constexpr int kHalf = 1 << (kLevels - 1 - kLevel);
  for (int i = 0; i < kHalf; ++i) v[i] = add_pairs<kLevel>(v[i], v[i + kHalf]);
}

template <std::size_t kCount>
inline void lane_sums_tree(const Batch<float> (&acc)[kCount], float* sums) {
  constexpr int kLevels = kCount <= 1 ? 0 : kCount <= 2 ? 1 : kCount <= 4 ? 2 : kCount <= 8 ? 3 : 4;
  __m512 v[1 << kLevels];
  for (std::size_t e = 0; e < (std::size_t{1} << kLevels); ++e) v[e] = e < kCount ? acc[e].data : _mm512_setzero_ps();
  if constexpr (kLevels > 0) add_level<0, kLevels>(v);
  if constexpr (kLevels > 1) add_level<1, kLevels>(v);
  if constexpr (kLevels > 2) add_level<2, kLevels>(v);
  if constexpr (kLevels > 3) add_level<3, kLevels>(v);
  // The bits still holding parts: 3, 2, 1, 0 after no level; 2, 1, 0 after level 0; 1, 0
  // after level 1; 1 after level 2; none after level 3.
  __m512 sum = v[0];
  if constexpr (kLevels == 0) sum = add_across_bit<3>(sum);
  if constexpr (kLevels <= 1) sum = add_across_bit<2>(sum);
  if constexpr (kLevels <= 3) sum = add_across_bit<1>(sum);
  if constexpr (kLevels <= 2) sum = add_across_bit<0>(sum);
  constexpr std::array<int, 16> kLane = [] {
    std::array<int, 16> lane{};
    for (int e = 0; e < (1 << kLevels); ++e) lane[static_cast<std::size_t>(e)] = lane_sums_lane(e, kLevels);
    return lane;
  }();
  constexpr bool kInOrder = [&] {
    for (int e = 0; e < static_cast<int>(kCount); ++e)
      if (kLane[static_cast<std::size_t>(e)] != e) return false;
    return true;
  }();
  if constexpr (!kInOrder) {  // into order by one permute
    sum = _mm512_permutexvar_ps(
        _mm512_setr_epi32(kLane[0], kLane[1], kLane[2], kLane[3], kLane[4], kLane[5], kLane[6], kLane[7], kLane[8],
                          kLane[9], kLane[10], kLane[11], kLane[12], kLane[13], kLane[14], kLane[15]),
        sum);
  }
  _mm512_storeu_ps(sums, sum);
}

}  // namespace detail
#endif

/// sums[e] = the sum of the lanes of acc[e] for e < kCount, each in a fixed order: with
/// AVX-512 up to one vector of accumulators by a tree of shuffles (detail::lane_sums_tree);
/// otherwise a vector of accumulators at a time by xsimd::haddp (missing ones count as zeros),
/// whose 512-bit version returns the sums permuted (lanes 0 1 4 5 2 3 6 7 8 9 12 13 10 11 14 15,
/// measured): use this, never haddp itself. `sums` holds kCount floats rounded up to a multiple
/// of kWidth<float>.
template <std::size_t kCount>
inline void lane_sums(const Batch<float> (&acc)[kCount], float* sums) {
  constexpr std::size_t kW = kWidth<float>;
#if defined(__AVX512F__)
  if constexpr (sizeof(Batch<float>) == 64) {
    static_assert(kCount <= kW, "at most one vector of accumulators");
    detail::lane_sums_tree(acc, sums);
    return;
  }
#endif
  for (std::size_t first = 0; first < kCount; first += kW) {
    Batch<float> full[kW];
    for (std::size_t e = 0; e < kW; ++e) full[e] = first + e < kCount ? acc[first + e] : Batch<float>(0.0f);
    xsimd::haddp(full).store_unaligned(sums + first);
  }
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
