// OnlineSoftmax (FlashAttention-2's running max, sum and accumulator, in base 2) fed tile by
// tile against the softmax of all tiles at once, in double: rows that see only -inf first,
// rows that stay empty, and a NaN value row whose weights are all zero (kSkip).

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "attnkit/core/rng.hpp"
#include "attnkit/detail/aligned_buffer.hpp"
#include "attnkit/kernel/online_softmax.hpp"
#include "attnkit/simd/score_tile.hpp"

namespace attnkit::testing {
namespace {

template <class T>
void expect_tiles_equal_one_softmax() {
  constexpr index_t kW = static_cast<index_t>(simd::kWidth<T>);
  constexpr T kMinusInf = -std::numeric_limits<T>::infinity();
  const index_t rows = 8, padded_rows = std::max(simd::kScoreRowBlock, simd::kValueRowBlock) * 2, tiles = 3;
  const index_t keys = 2 * kW, value_dim = 2 * kW, total = tiles * keys;
  // Base-2 scores [rows x total]: row 1 sees -inf in its first tile, row 2 everywhere (empty),
  // row 3 a large common offset; values [total x value_dim], the last key's row NaN and
  // masked (-inf) for every row.
  std::vector<double> scores(static_cast<std::size_t>(rows * total)),
      values(static_cast<std::size_t>(total * value_dim));
  for (index_t r = 0; r < rows; ++r)
    for (index_t c = 0; c < total; ++c) {
      double s = 4 * normal_from_counter(1, 0, static_cast<std::uint64_t>(r), static_cast<std::uint64_t>(c));
      if ((r == 1 && c < keys) || r == 2 || c == total - 1) s = -INFINITY;
      if (r == 3) s += 1000;
      scores[static_cast<std::size_t>(r * total + c)] = static_cast<T>(s);  // the kernel's own inputs
    }
  for (index_t j = 0; j < total; ++j)
    for (index_t d = 0; d < value_dim; ++d)
      values[static_cast<std::size_t>(j * value_dim + d)] =
          j == total - 1
              ? NAN
              : static_cast<T>(normal_from_counter(2, 0, static_cast<std::uint64_t>(j), static_cast<std::uint64_t>(d)));

  kernel::OnlineSoftmax<T> softmax(padded_rows, value_dim);
  softmax.reset(padded_rows);
  attnkit::detail::AlignedBuffer<T> tile(padded_rows * keys), value_rows(total * value_dim);
  for (index_t e = 0; e < total * value_dim; ++e)
    value_rows.data()[e] = static_cast<T>(values[static_cast<std::size_t>(e)]);
  for (index_t t = 0; t < tiles; ++t) {
    for (index_t r = 0; r < padded_rows; ++r)
      for (index_t c = 0; c < keys; ++c)
        tile.data()[r * keys + c] =
            r < rows ? static_cast<T>(scores[static_cast<std::size_t>(r * total + t * keys + c)]) : kMinusInf;
    softmax.absorb_scores(tile.data(), keys, rows, keys);
    softmax.template accumulate<simd::ZeroWeights::kSkip>(
        tile.data(), keys, kernel::ValueRows<T>{value_rows.data() + t * keys * value_dim, value_dim}, padded_rows, keys,
        value_dim / kW, true);
  }

  const double tol = std::is_same_v<T, float> ? 1e-5 : 1e-13;
  std::vector<T> out(static_cast<std::size_t>(value_dim));
  for (index_t r = 0; r < rows; ++r) {
    SCOPED_TRACE(r);
    const T lse = softmax.finish_row(r, out.data(), value_dim);
    double top = -INFINITY;
    for (index_t c = 0; c < total; ++c) top = std::max(top, scores[static_cast<std::size_t>(r * total + c)]);
    if (top == -INFINITY) {  // empty row: zeros and -inf
      EXPECT_EQ(lse, kMinusInf);
      for (T x : out) EXPECT_EQ(x, T(0));
      continue;
    }
    double z = 0;
    std::vector<double> expected(static_cast<std::size_t>(value_dim), 0.0);
    for (index_t c = 0; c < total; ++c) {
      const double s = scores[static_cast<std::size_t>(r * total + c)];
      if (s == -INFINITY) continue;
      const double w = std::exp2(s - top);
      z += w;
      for (index_t d = 0; d < value_dim; ++d)
        expected[static_cast<std::size_t>(d)] += w * values[static_cast<std::size_t>(c * value_dim + d)];
    }
    for (index_t d = 0; d < value_dim; ++d)
      EXPECT_NEAR(out[static_cast<std::size_t>(d)], expected[static_cast<std::size_t>(d)] / z, tol);
    EXPECT_NEAR(lse, std::log(2.0) * (top + std::log2(z)), tol * (1 + std::abs(top)));
  }
}

TEST(OnlineSoftmax, TilesEqualOneSoftmaxFloat) { expect_tiles_equal_one_softmax<float>(); }
TEST(OnlineSoftmax, TilesEqualOneSoftmaxDouble) { expect_tiles_equal_one_softmax<double>(); }

}  // namespace
}  // namespace attnkit::testing
