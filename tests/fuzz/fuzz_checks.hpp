#pragma once
// Checks both fuzz harnesses make (attention_fuzzer.cpp over tensors, decode_fuzzer.cpp over KV
// caches): the failure report, the softmax tolerance of SPEC.md section 11 with the rounding
// of the logits made explicit, bitwise comparison, NaN search, and the poison of outputs.

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "attnkit/core/half.hpp"
#include "attnkit/core/index.hpp"
#include "attnkit/core/tensor_view.hpp"
#include "support/accuracy.hpp"

namespace attnkit::fuzz {

/// The harness's assertion: aborts with `what` and the case when `holds` is false (libFuzzer
/// then saves the input).
inline void require(bool holds, const std::string& what, const std::string& case_text) {
  if (holds) return;
  std::fprintf(stderr, "fuzz check failed: %s\n  case: %s\n", what.c_str(), case_text.c_str());
  std::fflush(stderr);
  std::abort();
}

/// Largest Euclidean norm of a row of x (0 for an empty view).
template <class T>
double largest_row_norm(const TensorView<const T>& x) {
  double largest = 0;
  for (index_t b = 0; b < x.batch(); ++b)
    for (index_t h = 0; h < x.heads(); ++h)
      for (index_t l = 0; l < x.seq(); ++l) {
        double sum = 0;
        for (index_t d = 0; d < x.dim(); ++d)
          sum += static_cast<double>(x(b, h, l, d)) * static_cast<double>(x(b, h, l, d));
        if (std::isfinite(sum)) largest = std::max(largest, std::sqrt(sum));  // unread rows hold NaN / inf
      }
  return largest;
}

/// Largest |x| over the finite elements of x.
template <class T>
double largest_finite(const TensorView<const T>& x) {
  double largest = 0;
  for (index_t b = 0; b < x.batch(); ++b)
    for (index_t h = 0; h < x.heads(); ++h)
      for (index_t l = 0; l < x.seq(); ++l)
        for (index_t d = 0; d < x.dim(); ++d) {
          const double value = std::abs(static_cast<double>(x(b, h, l, d)));
          if (std::isfinite(value)) largest = std::max(largest, value);
        }
  return largest;
}

/// SPEC.md section 11's tolerance of the softmax kinds, with the rounding of the logits made
/// explicit: a length-D dot product (and, for Linformer, a length-Lk projection) rounds its
/// logit by about 4 sqrt(n) u times its size sigma |q| |k|, where the +1e4 offset set and the
/// scaled set make that size large; an error delta in a row's logits moves the output by at
/// most 2 delta max|V| and the log-sum-exp by delta. Float: atol (2e-5 + 2 delta) scale,
/// rtol 1e-4, lse atol 2e-5 + 2 delta, rtol 2e-5; double: 1e-12 in place of 2e-5 and 1e-4.
struct SoftmaxTolerance {
  testing::Tolerance out, lse;
};
template <class T>
SoftmaxTolerance softmax_tolerance(double scale, double logit_size, double rounding_terms, double projection_rounding) {
  constexpr double u = std::numeric_limits<T>::epsilon() / 2;
  constexpr double tight = std::is_same_v<T, float> ? 2e-5 : 1e-12, relative = std::is_same_v<T, float> ? 1e-4 : 1e-12;
  const double delta = 4 * std::sqrt(rounding_terms) * u * logit_size;
  return {{(tight + 2 * delta) * scale + projection_rounding, relative},
          {tight + 2 * delta, std::is_same_v<T, float> ? 2e-5 : 1e-12}};
}

/// The view's elements of two buffers, bit for bit.
template <class T>
bool same_bits(const TensorView<T>& a, const TensorView<T>& b) {
  for (index_t i = 0; i < a.batch(); ++i)
    for (index_t h = 0; h < a.heads(); ++h)
      for (index_t l = 0; l < a.seq(); ++l)
        if (std::memcmp(&a(i, h, l, 0), &b(i, h, l, 0), static_cast<std::size_t>(a.dim()) * sizeof(T)) != 0)
          return false;
  return true;
}

template <class T>
bool has_nan(const TensorView<T>& x) {
  for (index_t b = 0; b < x.batch(); ++b)
    for (index_t h = 0; h < x.heads(); ++h)
      for (index_t l = 0; l < x.seq(); ++l)
        for (index_t d = 0; d < x.dim(); ++d)
          if (std::isnan(widen(x(b, h, l, d)))) return true;
  return false;
}

/// A NaN whose bits the kernels never produce (they make NaN only from NaN inputs, and the
/// fuzzer gives them none they read), for output cells.
template <class T>
T poison_value() {
  if constexpr (std::is_same_v<T, float>) {
    return std::bit_cast<float>(std::uint32_t{0x7FC0BEEF});
  } else if constexpr (std::is_same_v<T, double>) {
    return std::bit_cast<double>(std::uint64_t{0x7FF8DEADBEEF0001});
  } else if constexpr (std::is_same_v<T, bfloat16>) {
    return bfloat16{0x7FEB};
  } else {
    return float16{0x7E6B};
  }
}

}  // namespace attnkit::fuzz
