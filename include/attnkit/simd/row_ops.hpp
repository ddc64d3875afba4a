#pragma once
// Vectorised passes over one row of a score tile (the softmax part of the fused kernel).

#include <cmath>
#include <limits>

#include "attnkit/core/index.hpp"
#include "attnkit/simd/batch.hpp"
#include "attnkit/simd/exp2.hpp"

namespace attnkit::simd {

/// max_c s[c] over c < n; n a multiple of kWidth<T>, s aligned. -inf for an all -inf row.
template <class T>
T row_max(const T* s, index_t n) {
  constexpr index_t kW = static_cast<index_t>(kWidth<T>);
  Batch<T> best(-std::numeric_limits<T>::infinity());
  for (index_t c = 0; c < n; c += kW) best = xsimd::max(best, Batch<T>::load_aligned(s + c));
  alignas(64) T lanes[kW];
  best.store_aligned(lanes);
  T result = lanes[0];
  for (index_t l = 1; l < kW; ++l) result = lanes[l] > result ? lanes[l] : result;
  return result;
}

/// s[c] = 2^(s[c] - shift) in place for c < n, and returns the sum of the new values (in a
/// fixed order, so the result does not depend on threads). n a multiple of kWidth<T>.
template <class T>
T exp2_shifted_sum(T* s, index_t n, T shift) {
  constexpr index_t kW = static_cast<index_t>(kWidth<T>);
  const Batch<T> subtrahend(shift);
  Batch<T> sum(T(0));
  for (index_t c = 0; c < n; c += kW) {
    const Batch<T> weights = exp2<T>(Batch<T>::load_aligned(s + c) - subtrahend);
    weights.store_aligned(s + c);
    sum += weights;
  }
  return xsimd::hadd(sum);
}

/// rescale[r] = 2^(old_max[r] - new_max[r]) for r < rows, the online-softmax correction of a
/// row's earlier terms, computed for a vector of rows at a time. A row that has seen only -inf
/// (new_max = -inf) gets 0, and a first finite max (old_max = -inf) gives 2^-inf = 0 as well.
template <class T>
void rescale_factors(const T* old_max, const T* new_max, T* rescale, index_t rows) {
  constexpr index_t kW = static_cast<index_t>(kWidth<T>);
  constexpr T kInf = std::numeric_limits<T>::infinity();
  // Explicit bounds for both loops: with the vector loop's counter carried into the tail,
  // GCC 12 at -march=znver3 (AVX2 doubles) reported the tail as running 2^61 times
  // (-Waggressive-loop-optimizations) once inlined with a constant row count.
  const index_t vector_rows = rows - rows % kW;
  for (index_t r = 0; r < vector_rows; r += kW) {
    const Batch<T> after = Batch<T>::load_unaligned(new_max + r);
    const Batch<T> factor = exp2<T>(Batch<T>::load_unaligned(old_max + r) - after);
    xsimd::select(after == Batch<T>(-kInf), Batch<T>(T(0)), factor).store_unaligned(rescale + r);
  }
  for (index_t r = vector_rows; r < rows; ++r)
    rescale[r] = new_max[r] == -kInf ? T(0) : std::exp2(old_max[r] - new_max[r]);
}

}  // namespace attnkit::simd
