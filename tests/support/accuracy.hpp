#pragma once
// Accuracy checks of SPEC.md section 11, reported as GoogleTest assertion results.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>

#include "support/test_data.hpp"

namespace attnkit::testing {

/// |x - ref| <= atol + rtol |ref| elementwise.
struct Tolerance {
  double atol = 0;
  double rtol = 0;
};

/// max |a - b| over two equally shaped tensors; NaN if either holds a NaN where the other
/// does not (so a NaN never passes as small).
template <class T>
double max_abs_difference(const Tensor<T>& a, const Tensor<T>& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.data.size(); ++i) {
    const double x = a.data[i], y = b.data[i];
    if (x == y) continue;  // also equal infinities
    const double diff = std::abs(x - y);
    if (std::isnan(diff)) return std::numeric_limits<double>::quiet_NaN();
    worst = std::max(worst, diff);
  }
  return worst;
}

/// Root-mean-square of a - b (NaN propagates): a statistically stable error measure for the
/// "at most 2x the naive error" rule, where the maximum over few elements is mostly noise.
template <class T>
double rms_difference(const Tensor<T>& a, const Tensor<T>& b) {
  double sum = 0;
  for (std::size_t i = 0; i < a.data.size(); ++i) {
    const double x = a.data[i], y = b.data[i];
    if (x != y) sum += (x - y) * (x - y);
  }
  return a.data.empty() ? 0.0 : std::sqrt(sum / static_cast<double>(a.data.size()));
}

/// Every element of `out` within `tol` of `ref` (equal infinities count as equal).
template <class T>
::testing::AssertionResult all_close(const Tensor<T>& out, const Tensor<T>& ref, Tolerance tol) {
  const TensorView<T>& o = out.view;
  for (index_t b = 0; b < o.batch(); ++b)
    for (index_t h = 0; h < o.heads(); ++h)
      for (index_t l = 0; l < o.seq(); ++l)
        for (index_t d = 0; d < o.dim(); ++d) {
          const double x = o(b, h, l, d), y = ref.view(b, h, l, d);
          if (x == y) continue;
          const double bound = tol.atol + tol.rtol * std::abs(y);
          if (!(std::abs(x - y) <= bound)) {
            std::ostringstream message;
            message.precision(10);
            message << "at [" << b << "," << h << "," << l << "," << d << "]: got " << x << ", reference " << y
                    << ", |diff| " << std::abs(x - y) << " > " << bound;
            return ::testing::AssertionFailure() << message.str();
          }
        }
  return ::testing::AssertionSuccess();
}

}  // namespace attnkit::testing
