#pragma once
// The scalar step the SIMD micro-kernels' tests compare against: one simd::fma lane.

#include <cmath>

namespace attnkit::testing {

/// a * b + c rounded as simd::fma rounds it: once where the instruction set has FMA, else
/// twice (a multiply, then an add).
template <class T>
T multiply_add(T a, T b, T c) {
#if defined(__FMA__)
  return std::fma(a, b, c);
#else
  return a * b + c;
#endif
}

}  // namespace attnkit::testing
