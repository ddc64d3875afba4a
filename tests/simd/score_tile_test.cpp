// simd::score_tile (the Q K^T micro-kernel, with its wide-row tails) against its element-wise
// definition: each score is the multiply-add chain over d in increasing order (fused where the
// instruction set has FMA, as simd::fma is), so the kernel must match it bit for bit in every
// build, the sanitizer one included. An epilogue gets each accumulator with its row and its
// first lane's column in the tile.

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "attnkit/detail/aligned_buffer.hpp"
#include "attnkit/simd/score_tile.hpp"
#include "simd/multiply_add.hpp"

namespace attnkit::testing {
namespace {

/// An epilogue that adds 1000 row + column to each score (exact integers in T), so that the
/// stored tile shows where the kernel said each accumulator lies.
struct MarkPlaces {
  template <class T>
  simd::Batch<T> operator()(const simd::Batch<T>& scores, index_t row, index_t column) const {
    alignas(64) T place[simd::kWidth<T>];
    for (std::size_t l = 0; l < simd::kWidth<T>; ++l) place[l] = static_cast<T>(1000 * row + column + index_t(l));
    return scores + simd::Batch<T>::load_aligned(place);
  }
};

template <class T>
void expect_scores(index_t rows, index_t cols, index_t head_dim, bool marked) {
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
  if (marked) {
    simd::score_tile(q.data(), head_dim, kt.data(), panel_cols, rows, cols, s.data(), s_stride, MarkPlaces{});
  } else {
    simd::score_tile(q.data(), head_dim, kt.data(), panel_cols, rows, cols, s.data(), s_stride);
  }
  for (index_t r = 0; r < rows; ++r)
    for (index_t c = 0; c < s_stride; ++c) {
      T expected = T(-7);  // columns past the tile's whole vectors are not written
      if (c < padded_cols) {
        expected = T(0);
        for (index_t d = 0; d < head_dim; ++d)
          expected = multiply_add(q[r * head_dim + d], kt[d * panel_cols + c], expected);
        if (marked) expected += static_cast<T>(1000 * r + c);
      }
      ASSERT_EQ(s[r * s_stride + c], expected)
          << rows << "x" << cols << " D " << head_dim << (marked ? " marked" : "") << " at " << r << "," << c;
    }
}

TEST(ScoreTile, MatchesFusedMultiplyAddChain) {
  // Row counts exercising 8-row tail blocks, their 4-row remainder, and column counts giving
  // every tail of 0 .. 3 vectors (in every instruction set's width).
  for (index_t rows : {4, 8, 12, 32})
    for (index_t cols : {1, 16, 17, 32, 40, 48, 64, 96, 100, 256})
      for (index_t head_dim : {1, 5, 64})
        for (bool marked : {false, true}) {
          expect_scores<float>(rows, cols, head_dim, marked);
          expect_scores<double>(rows, cols, head_dim, marked);
        }
}

}  // namespace
}  // namespace attnkit::testing
