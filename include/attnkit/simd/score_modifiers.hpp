#pragma once
// Vectorised score modifiers (SPEC.md section 14) on one row of scores in the kernels' base-2
// units (s' = log2(e) s): soft-capping, ALiBi's distance penalty.

#include <cmath>
#include <limits>
#include <type_traits>

#include "attnkit/core/index.hpp"
#include "attnkit/simd/batch.hpp"
#include "attnkit/simd/exp2.hpp"

namespace attnkit::simd {

namespace detail {

/// 1 / d per lane, d >= 1 and finite: vrcp14 and one Newton step (about 1 ulp) on AVX-512, a
/// division elsewhere.
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

/// 2^t per lane for t <= 64 (-inf gives 0, NaN stays NaN): exp2's reduction and polynomial
/// (simd/exp2.hpp) without its clamps and flush, which this range does not need: 8
/// instructions per AVX-512 vector (vreduce gives t - round(t), 0 for -inf; vscalef takes
/// n = -inf to 0).
template <class T>
Batch<T> exp2_at_most_64(const Batch<T>& t) {
#if defined(__AVX512DQ__)
  if constexpr (sizeof(Batch<T>) == 64) {
    constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    Batch<T> n, f;  // t = n + f, n integral, f in [-1/2, 1/2]
    if constexpr (std::is_same_v<T, float>) {
      n = _mm512_roundscale_ps(t, kNearest);
      f = _mm512_reduce_ps(t, kNearest);
    } else {
      n = _mm512_roundscale_pd(t, kNearest);
      f = _mm512_reduce_pd(t, kNearest);
    }
    const Batch<T> poly = exp2_polynomial(f);
    if constexpr (std::is_same_v<T, float>) return Batch<T>(_mm512_scalef_ps(poly, n));
    if constexpr (std::is_same_v<T, double>) return Batch<T>(_mm512_scalef_pd(poly, n));
  }
#endif
  return exp2<T>(t);
}

/// 0, 1, 2, ... in the lanes: the column of each lane from a vector's first one.
template <class T>
Batch<T> lane_indices() {
  alignas(64) T lanes[kWidth<T>];
  for (std::size_t l = 0; l < kWidth<T>; ++l) lanes[l] = static_cast<T>(l);
  return Batch<T>::load_aligned(lanes);
}

/// min(t, bound) per lane; NaN stays NaN.
template <class T>
Batch<T> at_most(const Batch<T>& t, T bound) {
#if defined(__AVX512F__)
  // vmin returns its second operand when either is NaN.
  if constexpr (sizeof(Batch<T>) == 64 && std::is_same_v<T, float>)
    return Batch<T>(_mm512_min_ps(_mm512_set1_ps(bound), t));
  if constexpr (sizeof(Batch<T>) == 64 && std::is_same_v<T, double>)
    return Batch<T>(_mm512_min_pd(_mm512_set1_pd(bound), t));
#endif
  return xsimd::select(xsimd::isnan(t), t, xsimd::min(t, Batch<T>(bound)));
}

}  // namespace detail

/// Soft-capping of base-2 scores x by a cap in the same units (log2(e) cap for a cap on
/// natural scores), x -> cap tanh(x / cap), per lane of t = 2 log2(e) x / cap (the score
/// divided ahead: the tiled driver folds the factor into its query scaling, so the score tile
/// computes t): cap - 2 cap / (2^t + 1), with t clamped to 64 (where tanh(t ln2 / 2) is 1 in
/// double). Absolute error within 3 ulp of cap (2.8 at worst over a dense sweep) and never beyond
/// +-cap: the rounding error of a score of the cap's size anyway, in 14 instructions per
/// AVX-512 vector against the 22 of a tanh accurate to ulps near 0 (SPEC.md section 14).
/// NaN stays NaN; +-inf give +-cap. Also score_tile's epilogue (simd/score_tile.hpp), which
/// caps the scores in registers.
template <class T>
struct SoftCap {
  /// t's factor: x times it is the argument operator() takes.
  static T divisor_factor(T cap_value) { return T(2 * 1.442695040888963407359924681001892137) / cap_value; }

  explicit SoftCap(T cap_value) : cap(cap_value) {}

  Batch<T> operator()(const Batch<T>& t) const {
    const Batch<T> power = detail::exp2_at_most_64<T>(detail::at_most(t, T(64)));
    const Batch<T> inverse = detail::reciprocal<T>(power + Batch<T>(T(1)));
    return fma(Batch<T>(-2 * cap), inverse, Batch<T>(cap));
  }
  /// As score_tile's epilogue (the place in the tile does not matter).
  Batch<T> operator()(const Batch<T>& t, index_t /*row*/, index_t /*column*/) const { return (*this)(t); }

  T cap;
};

/// score_tile's epilogue for ALiBi over consecutive keys: the scores through `inner` (the
/// plain scores or soft-capping, which comes first), then minus slope |offset_r - c| per lane,
/// for score tile row r and tile column c, where offsets[r] is row r's query position minus
/// the position of the key in column 0. Three instructions per vector (a subtraction, an
/// absolute value and an FMA) on the accumulators, instead of a pass over the stored scores.
/// Distances are exact in T up to 2^24 (float).
template <class T, class Inner>
struct DistancePenalty {
  /// offsets: one per row of the score tile, padded rows included; slope in base-2 units.
  DistancePenalty(const Inner& inner_epilogue, const T* row_offsets, T slope)
      : inner(inner_epilogue), offsets(row_offsets), minus_slope(-slope), lane(detail::lane_indices<T>()) {}

  Batch<T> operator()(const Batch<T>& scores, index_t row, index_t column) const {
    const Batch<T> distance = xsimd::abs(Batch<T>(offsets[row] - static_cast<T>(column)) - lane);
    return fma(distance, minus_slope, inner(scores, row, column));
  }

  Inner inner;
  const T* offsets;
  Batch<T> minus_slope, lane;
};

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
  const SoftCap<T> capped(cap);
  const Batch<T> factor(SoftCap<T>::divisor_factor(cap));
  detail::transform_row(s, n, [&](const Batch<T>& x, index_t) { return capped(x * factor); });
}

/// s[c] <- s[c] - slope |offset - c| for c < n: ALiBi's penalty of key first + c for a query at
/// position first + offset. Distances are exact in T up to 2^24 (float).
template <class T>
void subtract_distance(T* s, index_t n, T slope, index_t offset) {
  const Batch<T> lane = detail::lane_indices<T>(), minus_slope(-slope);
  detail::transform_row(s, n, [&](const Batch<T>& x, index_t c) {
    const Batch<T> distance = xsimd::abs(Batch<T>(static_cast<T>(offset - c)) - lane);
    return fma(distance, minus_slope, x);
  });
}

}  // namespace attnkit::simd
