#pragma once
// Vectorised feature maps over one feature's values for many rows (FFT-RPE's random
// features, SPEC.md section 9): exponentials for positive features, cosines and sines for
// trigonometric ones.

#include <cmath>

#include "attnkit/core/index.hpp"
#include "attnkit/simd/batch.hpp"
#include "attnkit/simd/exp2.hpp"

namespace attnkit::simd {

/// values[i] = exp(scale[i] * values[i] - shift[i]) for i < n, in place; every array holds
/// n rounded up to kWidth<T> elements (the padding lanes are computed and ignored).
template <class T>
void exp_of_scaled_rows(T* values, const T* scale, const T* shift, index_t n) {
  constexpr index_t kW = static_cast<index_t>(kWidth<T>);
  const Batch<T> log2e(T(1.442695040888963407359924681001892137));
  for (index_t i = 0; i < n; i += kW) {
    const Batch<T> exponent = simd::fma(Batch<T>::load_unaligned(scale + i), Batch<T>::load_unaligned(values + i),
                                        -Batch<T>::load_unaligned(shift + i));
    exp2<T>(exponent * log2e).store_unaligned(values + i);
  }
}

/// values[i] = amplitude[i] * cos(scale[i] * values[i]) (or sin) for i < n, in place; arrays
/// padded as for exp_of_scaled_rows.
template <class T>
void trig_of_scaled_rows(T* values, const T* scale, const T* amplitude, index_t n, bool sine) {
  constexpr index_t kW = static_cast<index_t>(kWidth<T>);
  for (index_t i = 0; i < n; i += kW) {
    const Batch<T> angle = Batch<T>::load_unaligned(scale + i) * Batch<T>::load_unaligned(values + i);
    const Batch<T> wave = sine ? xsimd::sin(angle) : xsimd::cos(angle);
    (wave * Batch<T>::load_unaligned(amplitude + i)).store_unaligned(values + i);
  }
}

/// max_i (scale[i] * values[i] - shift[i]) over i < n (no padding needed).
template <class T>
T max_of_scaled_rows(const T* values, const T* scale, const T* shift, index_t n) {
  T best = -INFINITY;
  for (index_t i = 0; i < n; ++i) best = std::fmax(best, scale[i] * values[i] - shift[i]);
  return best;
}

}  // namespace attnkit::simd
