// simd::key_dots (decode's scores) against the float64 dot products of the same values: every
// row count the tiles take (4, 2 and 1 at a time, and the remainders), key counts that fill
// whole tiles (four keys with four rows on AVX-512, else pairs) and leave pairs and single
// keys, head dims with and without a vector tail, and each cache
// element type (8-bit blocks dequantized as SPEC.md section 13 defines them). A tile whose
// pairs fill a vector is reduced in one step; a reduction that mixes up its lanes puts one
// key's score on another and misses the bound below by orders of magnitude.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "attnkit/cache/kv_cache.hpp"
#include "attnkit/core/half.hpp"
#include "attnkit/core/q8_block.hpp"
#include "attnkit/simd/key_dots.hpp"

namespace attnkit::testing {
namespace {

/// `count` keys of `head_dim` values as cache rows of E, `stride` elements apart, and their
/// values as stored (rounded, or dequantized), row-major [count x head_dim].
template <class E>
struct KeyRows {
  std::vector<E> rows;
  std::vector<double> values;
  index_t stride = 0;
};

template <class E>
KeyRows<E> make_keys(index_t count, index_t head_dim) {
  KeyRows<E> keys;
  constexpr index_t kPer = kValuesPerElement<E>;
  keys.stride = head_dim / kPer + 1;  // one spare element: rows are not contiguous
  keys.rows.resize(static_cast<std::size_t>(count * keys.stride));
  keys.values.resize(static_cast<std::size_t>(count * head_dim));
  std::vector<float> row(static_cast<std::size_t>(head_dim));
  for (index_t c = 0; c < count; ++c) {
    for (index_t d = 0; d < head_dim; ++d)
      row[static_cast<std::size_t>(d)] =
          static_cast<float>(std::cos(0.07 * static_cast<double>(c * head_dim + d)) + 0.01 * static_cast<double>(c));
    E* out = keys.rows.data() + c * keys.stride;
    double* value = keys.values.data() + c * head_dim;
    if constexpr (std::is_same_v<E, q8_0_block>) {
      for (index_t block = 0; block < head_dim / kPer; ++block) {
        out[block] = quantize_q8_0(row.data() + block * kPer);
        float dequantized[q8_0_block::kValues];
        dequantize_q8_0(out[block], dequantized);
        for (index_t i = 0; i < kPer; ++i) value[block * kPer + i] = dequantized[i];
      }
    } else {
      for (index_t d = 0; d < head_dim; ++d) {
        out[d] = store_as<E>(row[static_cast<std::size_t>(d)]);
        value[d] = static_cast<double>(widen(out[d]));
      }
    }
  }
  return keys;
}

/// key_dots of `rows` query rows with `count` keys against the float64 sums; each score may
/// carry the float rounding of its D products and sums, 2 D u sum_d |q_d k_d|.
template <class E>
void expect_dots(index_t rows, index_t count, index_t head_dim) {
  constexpr index_t kW = static_cast<index_t>(simd::kWidth<float>);
  const index_t query_stride = (head_dim + kW - 1) / kW * kW;  // zero past D, as decode pads them
  std::vector<float> queries(static_cast<std::size_t>(rows * query_stride), 0.0f);
  for (index_t r = 0; r < rows; ++r)
    for (index_t d = 0; d < head_dim; ++d)
      queries[static_cast<std::size_t>(r * query_stride + d)] =
          static_cast<float>(std::sin(0.13 * static_cast<double>(r * head_dim + d) + 0.5));
  const KeyRows<E> keys = make_keys<E>(count, head_dim);
  const index_t score_stride = count + 3;
  std::vector<float> scores(static_cast<std::size_t>(rows * score_stride), std::numeric_limits<float>::quiet_NaN());
  simd::key_dots(queries.data(), query_stride, rows, keys.rows.data(), keys.stride, count, head_dim, scores.data(),
                 score_stride);
  constexpr double u = std::numeric_limits<float>::epsilon() / 2;
  for (index_t r = 0; r < rows; ++r)
    for (index_t c = 0; c < count; ++c) {
      double dot = 0, size = 0;
      for (index_t d = 0; d < head_dim; ++d) {
        const double term = static_cast<double>(queries[static_cast<std::size_t>(r * query_stride + d)]) *
                            keys.values[static_cast<std::size_t>(c * head_dim + d)];
        dot += term;
        size += std::abs(term);
      }
      ASSERT_NEAR(scores[static_cast<std::size_t>(r * score_stride + c)], dot,
                  2 * static_cast<double>(head_dim) * u * size + 1e-30)
          << "rows " << rows << " keys " << count << " D " << head_dim << ": row " << r << " key " << c;
    }
  for (index_t r = 0; r < rows; ++r)
    for (index_t c = count; c < score_stride; ++c)
      ASSERT_TRUE(std::isnan(scores[static_cast<std::size_t>(r * score_stride + c)])) << "wrote past the keys";
}

template <class E>
class KeyDotsTest : public ::testing::Test {};
using CacheElements = ::testing::Types<float, bfloat16, float16, q8_0_block>;
TYPED_TEST_SUITE(KeyDotsTest, CacheElements);

TYPED_TEST(KeyDotsTest, EveryRowAndKeyCountMatchesTheDotProducts) {
  using E = TypeParam;
  const std::vector<index_t> dims =
      std::is_same_v<E, q8_0_block> ? std::vector<index_t>{32, 96, 128} : std::vector<index_t>{1, 7, 16, 45, 128};
  for (const index_t head_dim : dims)
    for (index_t rows = 1; rows <= 9; ++rows)
      for (index_t count = 1; count <= 17; ++count) expect_dots<E>(rows, count, head_dim);
}

}  // namespace
}  // namespace attnkit::testing
