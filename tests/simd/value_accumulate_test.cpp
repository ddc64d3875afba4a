// simd::accumulate_values (the P V micro-kernel, with its key chunks and its wide tail blocks)
// against its element-wise definition: each output element is alpha * O (or O unscaled when
// alpha is nullptr), then the multiply-add chain over the keys in increasing order (fused where
// the instruction set has FMA, as simd::fma is), so the kernel must match it bit for bit in
// every build, the sanitizer one included.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "attnkit/detail/aligned_buffer.hpp"
#include "attnkit/simd/value_accumulate.hpp"
#include "simd/multiply_add.hpp"

namespace attnkit::testing {
namespace {

/// rows x (value_vectors whole vectors) of O after one accumulate_values call, against the
/// chain; the columns of O past value_vectors must stay untouched. weights_zero_every: every
/// such key gets weight 0 and, with kSkip, a NaN value row that must not reach O.
template <class T, simd::ZeroWeights kZero>
void expect_values(index_t rows, index_t keys, index_t value_vectors, bool rescale, index_t weights_zero_every = 0) {
  constexpr index_t kW = static_cast<index_t>(simd::kWidth<T>);
  const index_t o_stride = (value_vectors + 1) * kW;  // one vector of O beyond the value dim
  const index_t v_stride = value_vectors * kW + 3;    // V rows unaligned, as read in place
  const index_t p_stride = keys + 5;
  detail::AlignedBuffer<T> o(rows * o_stride);
  std::vector<T> p(static_cast<std::size_t>(rows * p_stride)), v(static_cast<std::size_t>(keys * v_stride + kW));
  std::vector<T> alpha(static_cast<std::size_t>(rows));
  for (index_t e = 0; e < rows * o_stride; ++e) o[e] = std::sin(T(0.23) * static_cast<T>(e));
  for (std::size_t e = 0; e < p.size(); ++e) p[e] = T(0.5) + T(0.5) * std::cos(T(0.37) * static_cast<T>(e));
  for (std::size_t e = 0; e < v.size(); ++e) v[e] = std::sin(T(0.11) * static_cast<T>(e));
  for (std::size_t r = 0; r < alpha.size(); ++r) alpha[r] = T(0.25) + T(0.1) * static_cast<T>(r);
  if (weights_zero_every > 0) {
    for (index_t j = 0; j < keys; j += weights_zero_every) {
      for (index_t r = 0; r < rows; ++r) p[static_cast<std::size_t>(r * p_stride + j)] = T(0);
      v[static_cast<std::size_t>(j * v_stride)] = std::numeric_limits<T>::quiet_NaN();
    }
  }
  const std::vector<T> before(o.data(), o.data() + rows * o_stride);
  simd::accumulate_values<T, kZero>(o.data(), o_stride, rescale ? alpha.data() : nullptr, p.data(), p_stride, v.data(),
                                    v_stride, rows, keys, value_vectors);
  for (index_t r = 0; r < rows; ++r)
    for (index_t c = 0; c < o_stride; ++c) {
      T expected = before[static_cast<std::size_t>(r * o_stride + c)];
      if (c < value_vectors * kW) {
        if (rescale) expected *= alpha[static_cast<std::size_t>(r)];
        for (index_t j = 0; j < keys; ++j) {
          const T weight = p[static_cast<std::size_t>(r * p_stride + j)];
          if (kZero == simd::ZeroWeights::kSkip && weight == T(0)) continue;
          expected = multiply_add(weight, v[static_cast<std::size_t>(j * v_stride + c)], expected);
        }
      }
      ASSERT_EQ(o[r * o_stride + c], expected) << rows << " rows, " << keys << " keys, " << value_vectors
                                               << " vectors, rescale " << rescale << " at " << r << "," << c;
    }
}

TEST(AccumulateValues, MatchesFusedMultiplyAddChain) {
  // Vector counts giving every block split (blocks of 4, tails of 1 .. 3, the 5- and 6-vector
  // tail blocks of AVX-512), key counts around the chunk length of every width (16 ... 64
  // keys per chunk) and zero keys (the rescale alone).
  for (index_t value_vectors = 1; value_vectors <= 10; ++value_vectors)
    for (index_t keys : {0, 1, 15, 16, 33, 64, 65, 130})
      for (bool rescale : {true, false}) {
        expect_values<float, simd::ZeroWeights::kMultiply>(8, keys, value_vectors, rescale);
        expect_values<double, simd::ZeroWeights::kMultiply>(4, keys, value_vectors, rescale);
      }
}

TEST(AccumulateValues, SkipKeepsNanRowsOfZeroWeightsOut) {
  for (index_t value_vectors : {1, 4, 5, 6, 9})
    for (index_t keys : {7, 64, 100}) {
      expect_values<float, simd::ZeroWeights::kSkip>(8, keys, value_vectors, true, 3);
      expect_values<double, simd::ZeroWeights::kSkip>(4, keys, value_vectors, false, 3);
    }
}

}  // namespace
}  // namespace attnkit::testing
