// simd::score_tile (the Q K^T micro-kernel, with its wide-row tails) against its element-wise
// definition: each score is the multiply-add chain over d in increasing order (fused where the
// instruction set has FMA, as simd::fma is), so the kernel must match it bit for bit in every
// build, the sanitizer one included.

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "attnkit/detail/aligned_buffer.hpp"
#include "attnkit/simd/score_tile.hpp"
#include "simd/multiply_add.hpp"

namespace attnkit::testing {
namespace {

template <class T>
void expect_scores(index_t rows, index_t cols, index_t head_dim) {
  constexpr index_t kW = static_cast<index_t>(simd::kWidth<T>);
  const index_t padded_cols = (cols + kW - 1) / kW * kW;
  const index_t panel_cols = padded_cols + 2 * kW;  // the panel is wider than the tile
  std::vector<T> q(static_cast<std::size_t>(rows * head_dim));
  std::vector<T> kt(static_cast<std::size_t>(head_dim * panel_cols));
  for (std::size_t e = 0; e < q.size(); ++e) q[e] = std::sin(T(0.37) * static_cast<T>(e));
  for (std::size_t e = 0; e < kt.size(); ++e) kt[e] = std::cos(T(0.11) * static_cast<T>(e));
  const index_t s_stride = panel_cols;
  detail::AlignedBuffer<T> s(rows * s_stride);
  std::fill(s.data(), s.data() + rows * s_stride, T(-7));
  simd::score_tile(q.data(), head_dim, kt.data(), panel_cols, rows, cols, s.data(), s_stride);
  for (index_t r = 0; r < rows; ++r)
    for (index_t c = 0; c < s_stride; ++c) {
      T expected = T(-7);  // columns past the tile's whole vectors are not written
      if (c < padded_cols) {
        expected = T(0);
        for (index_t d = 0; d < head_dim; ++d)
          expected = multiply_add(q[r * head_dim + d], kt[d * panel_cols + c], expected);
      }
      ASSERT_EQ(s[r * s_stride + c], expected) << rows << "x" << cols << " D " << head_dim << " at " << r << "," << c;
    }
}

TEST(ScoreTile, MatchesFusedMultiplyAddChain) {
  // Row counts exercising 8-row tail blocks, their 4-row remainder, and column counts giving
  // every tail of 0 .. 3 vectors (in every instruction set's width).
  for (index_t rows : {4, 8, 12, 32})
    for (index_t cols : {1, 16, 17, 32, 40, 48, 64, 96, 100, 256})
      for (index_t head_dim : {1, 5, 64}) {
        expect_scores<float>(rows, cols, head_dim);
        expect_scores<double>(rows, cols, head_dim);
      }
}

}  // namespace
}  // namespace attnkit::testing
