#pragma once
// The check every kind's tests share: attnkit::attention against the float64 reference with
// SPEC.md section 11's tolerances (plus the plan checks of support/plan_checks.hpp).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "attnkit/attention.hpp"
#include "attnkit/reference/attention.hpp"
#include "support/accuracy.hpp"
#include "support/plan_checks.hpp"
#include "support/test_data.hpp"

namespace attnkit::testing {

/// attnkit::attention against reference::attention for one pattern, shape and input set, with
/// the tolerances of SPEC.md section 11 (output and log-sum-exp), with the same options on
/// both sides (score modifiers, scale).
template <class T, MaskedPattern P>
void expect_matches_reference(const P& pattern, const AttentionShape& s, InputSet set, std::uint64_t seed,
                              Layout layout = Layout::kBHLD, const Options& options = {}) {
  const Problem<T> p = make_problem<T>(s, set, seed, layout);
  Tensor<T> out(s.batch, s.q_heads, s.q_len, s.value_dim, layout), ref = out;
  Tensor<T> lse(s.batch, s.q_heads, s.q_len, 1, Layout::kBHLD), ref_lse = lse;
  attention(pattern, p.q.cview(), p.k.cview(), p.v.cview(), out.view, lse.view, options);
  reference::attention(pattern, p.q.cview(), p.k.cview(), p.v.cview(), ref.view, ref_lse.view, options);
  const double v_max = std::max(max_abs(p.v), 1e-30);

  if constexpr (std::is_same_v<T, float>) {
    // SPEC.md section 11: at most 2x the error of a naive float dense implementation plus 1e-6,
    // compared as RMS over the output (the maximum over a few rows mostly measures which
    // logits happened to round badly), and elementwise atol = 2e-5 max|V|, rtol = 1e-4.
    Tensor<T> naive = out;
    reference::detail::dense_attention<float, float>(pattern, p.q.cview(), p.k.cview(), p.v.cview(), naive.view,
                                                     nullptr, options);
    const double kernel_error = rms_difference(out, ref);
    const double naive_error = rms_difference(naive, ref);
    if (set != InputSet::kOffset) {
      EXPECT_LE(kernel_error, 2 * naive_error + 1e-6) << "naive float RMS error " << naive_error;
      EXPECT_TRUE(all_close(out, ref, Tolerance{2e-5 * v_max, 1e-4}));
    } else {
      // Logits of 1e4 carry float rounding of ulp(1e4) ~ 1e-3 in any float32 method, so the
      // SPEC bounds cannot hold. Elementwise bound: the rounding of a length-D float dot
      // product of that size, 4 sqrt(D) u max|s| (u = 2^-24, max|s| <= max lse), times max|V|;
      // the naive rule once there are enough rows for an RMS to mean something.
      const double logit_rounding = 4 * std::sqrt(static_cast<double>(s.head_dim)) * 0x1p-24 * max_abs(ref_lse);
      EXPECT_TRUE(all_close(out, ref, Tolerance{(2e-5 + logit_rounding) * v_max, 1e-4}));
      if (s.q_len >= 64) {
        EXPECT_LE(kernel_error, 2 * naive_error + 1e-6) << "naive float RMS error " << naive_error;
      }
    }
    EXPECT_TRUE(all_close(lse, ref_lse, Tolerance{2e-5, 2e-5}));
  } else {
    // float64: rtol 1e-12. Rounding of the logits themselves grows with their magnitude, so the
    // +1e4 offset set scales both bounds by 1e4.
    const double logit_scale = set == InputSet::kOffset ? 1e4 : 1.0;
    EXPECT_TRUE(all_close(out, ref, Tolerance{1e-12 * v_max * logit_scale, 1e-12 * logit_scale}));
    EXPECT_TRUE(all_close(lse, ref_lse, Tolerance{1e-12 * logit_scale, 1e-12}));
  }
}

}  // namespace attnkit::testing
