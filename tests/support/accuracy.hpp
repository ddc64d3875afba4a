#pragma once
// Accuracy checks of SPEC.md section 11, reported as GoogleTest assertion results.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <type_traits>

#include "attnkit/core/half.hpp"
#include "support/test_data.hpp"

namespace attnkit::testing {

/// |x - ref| <= atol + rtol |ref| elementwise.
struct Tolerance {
  double atol = 0;
  double rtol = 0;
};

/// The relative error of rounding to an output type (SPEC.md section 12: the unit roundoff,
/// half an ulp at the bottom of a binade): 2^-8 for bfloat16 (8 significant bits; INFERENCE.md's
/// 2^-9 is the top of a binade, which correct rounding alone exceeds), 2^-11 for float16, 0
/// for float and double.
template <class Out>
constexpr double output_rounding() {
  if constexpr (std::is_same_v<Out, bfloat16>) {
    return 0x1p-8;
  } else if constexpr (std::is_same_v<Out, float16>) {
    return 0x1p-11;
  } else {
    return 0.0;
  }
}

/// The absolute error of rounding a subnormal to an output type: half the spacing of its
/// subnormals, 2^-25 for float16 (outputs below 2^-14 lose relative precision), 2^-134 for
/// bfloat16, 0 for float and double (SPEC.md section 12).
template <class Out>
constexpr double output_subnormal_rounding() {
  if constexpr (std::is_same_v<Out, bfloat16>) {
    return 0x1p-134;
  } else if constexpr (std::is_same_v<Out, float16>) {
    return 0x1p-25;
  } else {
    return 0.0;
  }
}

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

/// Every element of the view `o` within `tol` of `ref` (equal infinities count as equal).
template <class T>
::testing::AssertionResult all_close(const TensorView<const T>& o, const TensorView<const T>& ref, Tolerance tol) {
  for (index_t b = 0; b < o.batch(); ++b)
    for (index_t h = 0; h < o.heads(); ++h)
      for (index_t l = 0; l < o.seq(); ++l)
        for (index_t d = 0; d < o.dim(); ++d) {
          const double x = o(b, h, l, d), y = ref(b, h, l, d);
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

/// As above, for two tensors.
template <class T>
::testing::AssertionResult all_close(const Tensor<T>& out, const Tensor<T>& ref, Tolerance tol) {
  return all_close<T>(out.cview(), ref.cview(), tol);
}

/// The outputs and log-sum-exps of a kernel, its float64 reference and (float calls) a naive
/// float evaluation of the same math.
template <class T>
struct Evaluations {
  const Tensor<T>& out;
  const Tensor<T>& ref;
  const Tensor<T>& naive;
  const Tensor<T>& lse;
  const Tensor<T>& ref_lse;
  const Tensor<T>& naive_lse;
};

/// SPEC.md section 11's rules for kinds whose logits can be large (Linformer's projected keys,
/// the +1e4 offset set): float, an RMS error at most 2x the naive float evaluation's plus 1e-6,
/// elementwise atol (2e-5 + 4 sqrt(D) u max|s|) scale (u = 2^-24; the rounding of a length-D
/// float dot product of logits up to `largest_logit`) and rtol 1e-4, lse within 2e-5 plus
/// twice the naive evaluation's worst lse error; double, rtol 1e-12 (atol 1e-12 scale).
/// `scale` is the size of the outputs (max |V|, or max |F V| for Linformer).
template <class T>
void expect_spec_accuracy(const Evaluations<T>& e, double scale, index_t head_dim, double largest_logit) {
  if constexpr (std::is_same_v<T, float>) {
    const double kernel_error = rms_difference(e.out, e.ref), naive_error = rms_difference(e.naive, e.ref);
    EXPECT_LE(kernel_error, 2 * naive_error + 1e-6) << "naive float RMS error " << naive_error;
    const double logit_rounding = 4 * std::sqrt(static_cast<double>(head_dim)) * 0x1p-24 * largest_logit;
    EXPECT_TRUE(all_close(e.out, e.ref, Tolerance{(2e-5 + logit_rounding) * scale, 1e-4}));
    const double naive_lse_error = max_abs_difference(e.naive_lse, e.ref_lse);
    EXPECT_TRUE(all_close(e.lse, e.ref_lse, Tolerance{2e-5 + 2 * naive_lse_error, 2e-5}));
  } else {
    EXPECT_TRUE(all_close(e.out, e.ref, Tolerance{1e-12 * scale, 1e-12}));
    EXPECT_TRUE(all_close(e.lse, e.ref_lse, Tolerance{1e-12, 1e-12}));
  }
}

}  // namespace attnkit::testing
