#pragma once
// OnlineSoftmax<T>: the running max / sum / accumulator of one query tile
// (FlashAttention-2, arXiv 2307.08691, Algorithm 1), in base 2.

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "attnkit/core/index.hpp"
#include "attnkit/detail/thread_scratch.hpp"
#include "attnkit/kernel/key_value_panels.hpp"
#include "attnkit/simd/row_ops.hpp"
#include "attnkit/simd/value_accumulate.hpp"
#include "attnkit/simd/widened_values.hpp"

namespace attnkit::kernel {

/// State of up to `rows` query rows, all in log2 units (scores arrive as log2(e) * s_ij):
///   max_[r]   running max m of the scores seen so far (-inf until a score is seen)
///   sum_[r]   running sum l of 2^(s - m)
///   rescale_[r] 2^(m_old - m_new) of the latest tile, consumed by the PV update of its
///             first key segment
///   acc_      [rows x value_stride] unnormalised output O~
template <class T>
class OnlineSoftmax {
 public:
  OnlineSoftmax(index_t rows, index_t value_stride)
      : value_stride_(value_stride),
        max_(detail::thread_scratch<struct RowMaxTag, T>(rows)),
        sum_(detail::thread_scratch<struct RowSumTag, T>(rows)),
        rescale_(detail::thread_scratch<struct RowRescaleTag, T>(rows)),
        new_max_(detail::thread_scratch<struct RowNewMaxTag, T>(rows)),
        acc_(detail::thread_scratch<struct AccumulatorTag, T>(rows * value_stride)) {}

  void reset(index_t rows) {
    for (index_t r = 0; r < rows; ++r) {
      max_[r] = -kInf;
      sum_[r] = T(0);
      rescale_[r] = T(0);
    }
    std::fill(acc_, acc_ + rows * value_stride_, T(0));
  }

  /// Turns rows [0, rows) of the score tile into weights 2^(s - m_new) in place and updates
  /// the max and sum of rows [first_row, first_row + rows). `scores` is [rows x score_stride];
  /// columns [0, columns) are read, columns is a multiple of the vector width and excluded
  /// entries hold -inf. The -inf guard of SPEC.md section 1: while a row has seen only -inf, 0
  /// stands in for m_new and the rescale is 0.
  void absorb_scores(T* scores, index_t score_stride, index_t rows, index_t columns, index_t first_row = 0) {
    T *max = max_ + first_row, *new_max = new_max_ + first_row, *sum = sum_ + first_row;
    T* rescale = rescale_ + first_row;
    for (index_t r = 0; r < rows; ++r) new_max[r] = std::max(max[r], simd::row_max(scores + r * score_stride, columns));
    simd::rescale_factors(max, new_max, rescale, rows);
    for (index_t r = 0; r < rows; ++r) {
      const T shift = new_max[r] == -kInf ? T(0) : new_max[r];
      sum[r] = sum[r] * rescale[r] + simd::exp2_shifted_sum(scores + r * score_stride, columns, shift);
      max[r] = new_max[r];
    }
  }

  /// O~ = rescale * O~ + P V over `keys` value rows (see simd::accumulate_values), for the
  /// first key segment of the absorbed scores; later segments (`first_segment` false) add
  /// P V to O~ as it is. Rows [first_row, first_row + padded_rows) of O~ (first_row a
  /// multiple of simd::kValueRowBlock; `weights` points at row first_row's).
  template <simd::ZeroWeights kZero>
  void accumulate(const T* weights, index_t weight_stride, const ValueRows<T>& values, index_t padded_rows,
                  index_t keys, index_t value_vectors, bool first_segment, index_t first_row = 0) {
    simd::accumulate_values<T, kZero>(acc_ + first_row * value_stride_, value_stride_,
                                      first_segment ? rescale_ + first_row : nullptr, weights, weight_stride,
                                      values.rows, values.stride, padded_rows, keys, value_vectors);
  }

  /// accumulate for `keys` value rows of a KV cache's element type E (value_row_stride elements
  /// apart, value_vectors whole vectors each), widened in registers (simd/widened_values.hpp),
  /// into rows [first_row, first_row + padded_rows) of O~.
  template <simd::ZeroWeights kZero, class E>
  void accumulate_widened(const T* weights, index_t weight_stride, const E* values, index_t value_row_stride,
                          index_t first_row, index_t padded_rows, index_t keys, index_t value_vectors,
                          bool first_segment, const simd::RowPrefetch<E>& ahead = {}) {
    static_assert(std::is_same_v<T, float>, "cache rows widen to float");
    simd::accumulate_widened_values<E, kZero>(acc_ + first_row * value_stride_, value_stride_,
                                              first_segment ? rescale_ + first_row : nullptr, weights, weight_stride,
                                              values, value_row_stride, padded_rows, keys, value_vectors, ahead);
  }

  /// Row r's output O~ / l (or zeros for an empty row, l = 0) into out[0, value_dim), and its
  /// natural-log log-sum-exp ln 2 * (m + log2 l) (or -inf).
  T finish_row(index_t r, T* out, index_t value_dim) const {
    const T l = sum_[r];
    const T* acc = acc_ + r * value_stride_;
    if (l == T(0)) {
      for (index_t d = 0; d < value_dim; ++d) out[d] = T(0);
      return -kInf;
    }
    const T inverse = T(1) / l;
    for (index_t d = 0; d < value_dim; ++d) out[d] = acc[d] * inverse;
    constexpr T kLn2 = T(0.693147180559945309417232121458176568);
    return kLn2 * (max_[r] + std::log2(l));
  }

 private:
  static constexpr T kInf = std::numeric_limits<T>::infinity();
  index_t value_stride_;
  // Per-thread scratch (detail::thread_scratch): one OnlineSoftmax per thread and call.
  T* max_;
  T* sum_;
  T* rescale_;
  T* new_max_;  // the running max after the current tile, before it replaces max_
  T* acc_;
};

}  // namespace attnkit::kernel
