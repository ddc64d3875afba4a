#pragma once
// Vectorised score modifiers (SPEC.md section 14) on one row of scores in the kernels' base-2
// units (s' = log2(e) s): soft-capping by a vectorised tanh, ALiBi's distance penalty.

#include <array>
#include <cmath>
#include <limits>
#include <type_traits>

#include "attnkit/core/index.hpp"
#include "attnkit/simd/batch.hpp"
#include "attnkit/simd/exp2.hpp"

namespace attnkit::simd {

namespace detail {

/// t rounded to the nearest integer n (ties to even) and 2^n, for t in [0, 64] or NaN (then
/// n is NaN and 2^n unspecified, with no float-to-integer conversion of it).
template <class T>
struct RoundedPower {
  Batch<T> n, power;
};
template <class T>
RoundedPower<T> rounded_power_of_two(const Batch<T>& t) {
#if defined(__AVX512F__)
  if constexpr (sizeof(Batch<T>) == 64) {
    const Batch<T> n = xsimd::nearbyint(t);
    if constexpr (std::is_same_v<T, float>) return {n, Batch<T>(_mm512_scalef_ps(Batch<T>(T(1)), n))};
    if constexpr (std::is_same_v<T, double>) return {n, Batch<T>(_mm512_scalef_pd(Batch<T>(T(1)), n))};
  }
#endif
  // exp2's trick: t + 1.5 2^m holds n in its low mantissa bits.
  using Bits = FloatBits<T>;
  using IntBatch = xsimd::batch<typename Bits::Int>;
  const Batch<T> shifted = t + Batch<T>(Bits::kRoundingShift);
  const IntBatch n_bits =
      xsimd::bitwise_cast<IntBatch>(shifted) - xsimd::bitwise_cast<IntBatch>(Batch<T>(Bits::kRoundingShift));
  return {shifted - Batch<T>(Bits::kRoundingShift),
          xsimd::bitwise_cast<Batch<T>>((n_bits + IntBatch(Bits::kBias)) << Bits::kMantissaBits)};
}

/// Coefficients of q(f) = (2^f - 1) / f on [-1/2, 1/2], lowest first, so that 2^f - 1 = f q(f)
/// keeps its relative accuracy as f goes to 0 (exp2's polynomial, fitted on 2^f, is 3e-7 off
/// in its linear term). float: degree 5, fitted here by iteratively reweighted least squares
/// on relative error (Lawson's algorithm, 4000 Chebyshev nodes): 1.1e-8, about one ulp once
/// evaluated in float. double: the Taylor series of exp2's double polynomial without its
/// constant term.
template <class T>
struct Exp2MinusOneQuotient;
template <>
struct Exp2MinusOneQuotient<float> {
  static constexpr std::array<float, 6> value = {0.6931471879266717f,   0.2402264979484095f,   0.05550357433695613f,
                                                 0.009618237513931267f, 0.001339073545387745f, 0.00015403506278940937f};
};
template <>
struct Exp2MinusOneQuotient<double> {
  static constexpr std::array<double, 13> value = [] {
    std::array<double, 13> q{};
    for (std::size_t k = 0; k < q.size(); ++k) q[k] = Exp2Coefficients<double>::value[k + 1];
    return q;
  }();
};

/// 1 / d per lane, d >= 2: vrcp14 and one Newton step (about 1 ulp) on AVX-512, a division
/// elsewhere.
template <class T>
Batch<T> reciprocal(const Batch<T>& d) {
#if defined(__AVX512F__)
  if constexpr (sizeof(Batch<T>) == 64 && std::is_same_v<T, float>) {
    const Batch<T> r(_mm512_rcp14_ps(d));
    return r * fma(-d, r, Batch<T>(T(2)));
  }
#endif
  return Batch<T>(T(1)) / d;
}

}  // namespace detail

/// tanh per lane, as e / (e + 2) with e = e^{2|y|} - 1 = 2^t - 1, t = 2 log2(e) |y|, computed
/// without cancellation: t = n + f (n integral, |f| <= 1/2), 2^t - 1 = 2^n (2^f - 1) + (2^n - 1),
/// with 2^f - 1 = f q(f) (detail::Exp2MinusOneQuotient) and 2^n - 1 exact. |y| is clamped where
/// tanh rounds to 1 (9 in float, 19 in double); the sign is restored last. Relative error
/// within a few ulp everywhere (tests/kernel/score_modifiers_test.cpp); NaN stays NaN.
/// tanh(x / c) per lane, for c > 0 given as `doubled_log2e_over_c` = 2 log2(e) / c (softcap's
/// form: one multiply instead of two); tanh(y) is tanh_scaled(y, 2 log2(e)).
template <class T>
Batch<T> tanh_scaled(const Batch<T>& x, T doubled_log2e_over_c) {
  constexpr T kLog2e = T(1.442695040888963407359924681001892137);
  constexpr T kSaturation = 2 * kLog2e * (std::is_same_v<T, float> ? T(9) : T(19));
  constexpr auto& c = detail::Exp2MinusOneQuotient<T>::value;
  const Batch<T> sign_bit(-T(0));
  const Batch<T> scaled = x * Batch<T>(doubled_log2e_over_c);
  Batch<T> t = xsimd::abs(scaled);  // |x| 2 log2(e) / c
#if defined(__AVX512F__)
  // vminps returns its second operand when either is NaN: a NaN lane stays NaN to the end.
  if constexpr (sizeof(Batch<T>) == 64 && std::is_same_v<T, float>) {
    t = Batch<T>(_mm512_min_ps(_mm512_set1_ps(kSaturation), t));
  } else if constexpr (sizeof(Batch<T>) == 64 && std::is_same_v<T, double>) {
    t = Batch<T>(_mm512_min_pd(_mm512_set1_pd(kSaturation), t));
  } else
#endif
  {
    t = xsimd::select(xsimd::isnan(t), t, xsimd::min(t, Batch<T>(kSaturation)));
  }
  const auto [n, power] = detail::rounded_power_of_two(t);
  const Batch<T> f = t - n;
  Batch<T> q(c[c.size() - 1]);
  for (std::size_t k = c.size() - 1; k-- > 0;) q = fma(q, f, Batch<T>(c[k]));
  const Batch<T> e = fma(f * q, power, power - Batch<T>(T(1)));
  const Batch<T> magnitude = e * detail::reciprocal(e + Batch<T>(T(2)));
  return magnitude | (scaled & sign_bit);  // magnitude >= 0 (or NaN): the sign of x
}

/// tanh per lane (see tanh_scaled).
template <class T>
Batch<T> tanh(const Batch<T>& y) {
  return tanh_scaled(y, T(2 * 1.442695040888963407359924681001892137));
}

namespace detail {

/// f(Batch) over s[0 .. n) in place, unaligned; the last partial vector through a padded copy,
/// so that every element gets the vector arithmetic.
template <class T, class F>
void transform_row(T* s, index_t n, F&& f) {
  constexpr index_t kW = static_cast<index_t>(kWidth<T>);
  const index_t whole = n - n % kW;
  for (index_t c = 0; c < whole; c += kW) f(Batch<T>::load_unaligned(s + c), c).store_unaligned(s + c);
  if (whole == n) return;
  alignas(64) T tail[kW] = {};
  for (index_t c = whole; c < n; ++c) tail[c - whole] = s[c];
  f(Batch<T>::load_aligned(tail), whole).store_aligned(tail);
  for (index_t c = whole; c < n; ++c) s[c] = tail[c - whole];
}

}  // namespace detail

/// s[c] <- cap tanh(s[c] / cap) for c < n, cap > 0 (both in the same units: base-2 scores
/// take cap log2(e)).
template <class T>
void soft_cap(T* s, index_t n, T cap) {
  const Batch<T> scale(cap);
  const T doubled_log2e_over_cap = T(2 * 1.442695040888963407359924681001892137) / cap;
  detail::transform_row(s, n,
                        [=](const Batch<T>& x, index_t) { return scale * tanh_scaled<T>(x, doubled_log2e_over_cap); });
}

/// s[c] <- s[c] - slope |offset - c| for c < n: ALiBi's penalty of key first + c for a query at
/// position first + offset. Distances are exact in T up to 2^24 (float).
template <class T>
void subtract_distance(T* s, index_t n, T slope, index_t offset) {
  constexpr index_t kW = static_cast<index_t>(kWidth<T>);
  alignas(64) T lanes[kW];
  for (index_t l = 0; l < kW; ++l) lanes[l] = static_cast<T>(l);
  const Batch<T> lane = Batch<T>::load_aligned(lanes), minus_slope(-slope);
  detail::transform_row(s, n, [&](const Batch<T>& x, index_t c) {
    const Batch<T> distance = xsimd::abs(Batch<T>(static_cast<T>(offset - c)) - lane);
    return fma(distance, minus_slope, x);
  });
}

}  // namespace attnkit::simd
