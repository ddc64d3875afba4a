// simd::accumulate_widened_values (decode's P V over cache rows widened in registers) against its
// element-wise definition: each output element is alpha * O (or O unscaled when alpha is
// nullptr), then the multiply-add chain over the keys in increasing order of the weights times
// the stored values (float16 and bfloat16 widened exactly; 8-bit blocks as their scale times the
// integer, which float holds exactly), fused where the instruction set has FMA. The kernel must
// match it bit for bit in every build, whatever its register blocks (2 rows x 8 vectors on
// AVX-512, 2 x 4 on AVX2, 4 x 4 for 8-bit blocks) and whatever rows it prefetches.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "attnkit/cache/kv_cache.hpp"
#include "attnkit/core/half.hpp"
#include "attnkit/core/q8_block.hpp"
#include "attnkit/detail/aligned_buffer.hpp"
#include "attnkit/simd/widened_values.hpp"
#include "simd/multiply_add.hpp"

namespace attnkit::testing {
namespace {

/// `keys` V rows of E holding `values` values each, `stride` elements apart (one spare element
/// between rows), and their stored values as float (exact), row-major [keys x values].
template <class E>
struct CacheValueRows {
  std::vector<E> rows;
  std::vector<float> values;
  index_t stride = 0;
};

template <class E>
CacheValueRows<E> make_value_rows(index_t keys, index_t values) {
  CacheValueRows<E> v;
  constexpr index_t kPer = kValuesPerElement<E>;
  v.stride = values / kPer + 1;
  v.rows.resize(static_cast<std::size_t>(keys * v.stride));
  v.values.resize(static_cast<std::size_t>(keys * values));
  std::vector<float> row(static_cast<std::size_t>(values));
  for (index_t j = 0; j < keys; ++j) {
    for (index_t d = 0; d < values; ++d)
      row[static_cast<std::size_t>(d)] = std::sin(0.11f * static_cast<float>(j * values + d)) * (1.0f + 0.1f * j);
    E* out = v.rows.data() + j * v.stride;
    float* stored = v.values.data() + j * values;
    if constexpr (std::is_same_v<E, q8_0_block>) {
      for (index_t block = 0; block < values / kPer; ++block) {
        out[block] = quantize_q8_0(row.data() + block * kPer);
        dequantize_q8_0(out[block], stored + block * kPer);
      }
    } else {
      for (index_t d = 0; d < values; ++d) {
        out[d] = store_as<E>(row[static_cast<std::size_t>(d)]);
        stored[d] = static_cast<float>(widen(out[d]));
      }
    }
  }
  return v;
}

/// rows x (value_vectors whole vectors) of O after one call, against the chain; the columns of
/// O past value_vectors must stay untouched. zero_every > 0: every such key gets weight 0 for
/// all rows (with kSkip its products are skipped, with kMultiply added as zeros).
template <class E, simd::ZeroWeights kZero>
void expect_widened_values(index_t rows, index_t keys, index_t value_vectors, bool rescale, index_t zero_every = 0) {
  constexpr index_t kW = static_cast<index_t>(simd::kWidth<float>);
  const index_t value_dim = value_vectors * kW;
  const index_t o_stride = value_dim + kW;  // one vector of O beyond the value dim
  const index_t p_stride = keys + 5;
  const CacheValueRows<E> v = make_value_rows<E>(keys, value_dim);
  detail::AlignedBuffer<float> o(rows * o_stride);
  std::vector<float> p(static_cast<std::size_t>(rows * p_stride)), alpha(static_cast<std::size_t>(rows));
  for (index_t e = 0; e < rows * o_stride; ++e) o[e] = std::sin(0.23f * static_cast<float>(e));
  for (std::size_t e = 0; e < p.size(); ++e) p[e] = 0.5f + 0.5f * std::cos(0.37f * static_cast<float>(e));
  for (std::size_t r = 0; r < alpha.size(); ++r) alpha[r] = 0.25f + 0.1f * static_cast<float>(r);
  if (zero_every > 0)
    for (index_t j = 0; j < keys; j += zero_every)
      for (index_t r = 0; r < rows; ++r) p[static_cast<std::size_t>(r * p_stride + j)] = 0.0f;
  const std::vector<float> before(o.data(), o.data() + rows * o_stride);
  // The rows prefetched ahead are the call's own (a prefetch changes no result).
  const simd::RowPrefetch<E> ahead{v.rows.data(), v.stride, keys, v.stride};
  simd::accumulate_widened_values<E, kZero>(o.data(), o_stride, rescale ? alpha.data() : nullptr, p.data(), p_stride,
                                            v.rows.data(), v.stride, rows, keys, value_vectors, ahead);
  for (index_t r = 0; r < rows; ++r)
    for (index_t c = 0; c < o_stride; ++c) {
      float expected = before[static_cast<std::size_t>(r * o_stride + c)];
      if (c < value_dim) {
        if (rescale) expected *= alpha[static_cast<std::size_t>(r)];
        for (index_t j = 0; j < keys; ++j) {
          const float weight = p[static_cast<std::size_t>(r * p_stride + j)];
          if (kZero == simd::ZeroWeights::kSkip && weight == 0.0f) continue;
          expected = multiply_add(weight, v.values[static_cast<std::size_t>(j * value_dim + c)], expected);
        }
      }
      ASSERT_EQ(o[r * o_stride + c], expected) << rows << " rows, " << keys << " keys, " << value_vectors
                                               << " vectors, rescale " << rescale << " at " << r << "," << c;
    }
}

template <class E>
class WidenedValuesTest : public ::testing::Test {};
using WidenedCacheElements = ::testing::Types<float, bfloat16, float16, q8_0_block>;
TYPED_TEST_SUITE(WidenedValuesTest, WidenedCacheElements);

/// Vector counts of the value dim: whole register blocks of every width and type, blocks plus
/// single-vector tails; for 8-bit blocks only whole 32-value blocks.
template <class E>
std::vector<index_t> widened_vector_counts() {
  constexpr index_t kW = static_cast<index_t>(simd::kWidth<float>);
  if constexpr (std::is_same_v<E, q8_0_block>) {
    const index_t per_block = kW >= 32 ? 1 : 32 / kW;
    return {per_block, 2 * per_block, 3 * per_block, 4 * per_block, 5 * per_block};
  } else {
    return {1, 2, 3, 4, 5, 8, 9, 12};
  }
}

TYPED_TEST(WidenedValuesTest, MatchesFusedMultiplyAddChain) {
  // Key counts around the groups of 8 keys, zero keys (the rescale alone), 4 and 8 rows.
  for (const index_t value_vectors : widened_vector_counts<TypeParam>())
    for (index_t keys : {0, 1, 7, 8, 9, 64})
      for (bool rescale : {true, false})
        for (index_t rows : {4, 8})
          expect_widened_values<TypeParam, simd::ZeroWeights::kMultiply>(rows, keys, value_vectors, rescale);
}

TYPED_TEST(WidenedValuesTest, SkipLeavesOutZeroWeights) {
  for (const index_t value_vectors : widened_vector_counts<TypeParam>())
    for (index_t keys : {7, 64})
      expect_widened_values<TypeParam, simd::ZeroWeights::kSkip>(4, keys, value_vectors, true, 3);
}

}  // namespace
}  // namespace attnkit::testing
