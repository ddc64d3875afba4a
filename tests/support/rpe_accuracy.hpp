#pragma once
// KernelizedRpe's accuracy rule (SPEC.md section 11: tolerances on numerator and denominator),
// as a GoogleTest assertion result.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "attnkit/core/options.hpp"
#include "attnkit/core/tensor_view.hpp"
#include "attnkit/kernel/random_features.hpp"
#include "attnkit/kernel/toeplitz_fft.hpp"
#include "attnkit/pattern/kernelized_rpe.hpp"
#include "attnkit/reference/kernelized_rpe.hpp"

namespace attnkit::testing {

/// Checks every element of `out` (the kernel's output of `rpe` on q, k, v) against the float64
/// reference sums: |d num| <= 2e-5 max|V| S_i + 1e-4 |num_i| and |d den| <= 1e-4 S_i
/// (S_i = sum_j c_ij sum_u |phi_u(q_i)| |phi_u(k_j)|, the size of the terms the sums add:
/// sum_j |w_ij| for the positive maps; trigonometric features cancel inside w_ij, and a
/// weight's rounding is relative to its terms, not to itself), so |d o| <= (2e-5 max|V| S_i + 1e-4 |num_i| +
/// 1e-4 |o_i| S_i) / |den_i|; double: 1e-12 for both. With `column_relative` (the FFT path's
/// stated accuracy) each sum may also be off by 8 eps log2(L) times its Toeplitz columns'
/// largest entries (RpeSums::column_scale, times max|V| for the numerator).
/// `feature_rounding` is a relative error every weight w_ij may carry on top (the rounding of
/// the features' exponents when they are large): it adds to atol and to the denominator's rtol.
/// Underflow: after the stabilisers every feature and every c_t is at most 1, and each may
/// lose up to the smallest normal of T (a feature, a product of two, c_t), so every weight
/// carries an absolute error of 4 F min_T (F features), and each product of a weight and a
/// value one of min_T (values far below 1 times weights near T's range): the sums Lk times
/// that, 4 F Lk min_T on the denominator and 4 F Lk min_T (max|V| + 1) on the numerator; a
/// row whose weights all lie below T's range comes out 0, as an empty row does (SPEC.md
/// section 9).
template <class T>
::testing::AssertionResult rpe_matches_reference(const KernelizedRpe& rpe, const TensorView<const T>& q,
                                                 const TensorView<const T>& k, const TensorView<const T>& v,
                                                 const TensorView<const T>& out, const Options& options = {},
                                                 bool column_relative = true, double feature_rounding = 0) {
  const AttentionShape s{q.batch(), q.heads(), k.heads(), q.seq(), k.seq(), q.dim(), v.dim()};
  const double sigma = options.scale.value_or(1.0 / std::sqrt(static_cast<double>(s.head_dim)));
  double max_v = 1e-30;
  for (index_t b = 0; b < v.batch(); ++b)
    for (index_t h = 0; h < v.heads(); ++h)
      for (index_t j = 0; j < v.seq(); ++j)
        for (index_t d = 0; d < v.dim(); ++d) max_v = std::max(max_v, std::abs(static_cast<double>(v(b, h, j, d))));
  const double rtol = std::is_same_v<T, float> ? 1e-4 : 1e-12, atol = std::is_same_v<T, float> ? 2e-5 : 1e-12;
  const bool fft = rpe.uses_fft(s, std::numeric_limits<T>::epsilon()) && column_relative;
  const double fft_rate = 8 * std::numeric_limits<T>::epsilon() *
                          std::log2(static_cast<double>(kernel::circulant_length(s.q_len, s.kv_len)));
  const double underflow = 4.0 * static_cast<double>(feature_count(rpe.map, rpe.features)) *
                           static_cast<double>(s.kv_len) * static_cast<double>(std::numeric_limits<T>::min());
  for (index_t b = 0; b < s.batch; ++b)
    for (index_t h = 0; h < s.q_heads; ++h) {
      const reference::RpeSums<double> sums = reference::kernelized_rpe_sums<double>(rpe, q, k, v, b, h, sigma);
      for (index_t i = 0; i < s.q_len; ++i) {
        const double den = sums.den[static_cast<std::size_t>(i)];
        const double fft_term = fft ? fft_rate * sums.column_scale[static_cast<std::size_t>(i)] : 0.0;
        const double size = sums.magnitude[static_cast<std::size_t>(i)] + fft_term / atol;
        for (index_t d = 0; d < s.value_dim; ++d) {
          const double num = sums.num[static_cast<std::size_t>(i * s.value_dim + d)];
          const double expected = den == 0 ? 0.0 : num / den;
          const double got = out(b, h, i, d);
          const double bound =
              den == 0 ? 0.0
                       : ((atol + feature_rounding) * max_v * size + rtol * std::abs(num) + underflow * (max_v + 1) +
                          ((rtol + feature_rounding) * size + underflow) * std::abs(expected)) /
                             std::abs(den);
          if (!(std::abs(got - expected) <= bound)) {
            return ::testing::AssertionFailure() << "b " << b << " h " << h << " i " << i << " d " << d << ": " << got
                                                 << " vs " << expected << " (bound " << bound << ")";
          }
        }
      }
    }
  return ::testing::AssertionSuccess();
}

}  // namespace attnkit::testing
