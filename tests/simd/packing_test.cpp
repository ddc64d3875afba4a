// simd::transpose_rows (the K^T panel packer, with its in-register AVX-512 path) and
// simd::all_finite and simd::copy_padded_row against their element-wise definitions.

#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <limits>
#include <vector>

#include "attnkit/simd/packing.hpp"

namespace attnkit::testing {
namespace {

template <class T>
void expect_transposes(index_t rows, index_t cols) {
  const index_t stride = cols + 3;  // source rows are not adjacent in general
  std::vector<T> source(static_cast<std::size_t>(rows * stride));
  for (std::size_t e = 0; e < source.size(); ++e) source[e] = static_cast<T>(e) + T(0.5);
  const index_t dst_stride = rows + 5;
  std::vector<T> dst(static_cast<std::size_t>(cols * dst_stride), T(-1));
  simd::transpose_rows(
      rows, cols, [&](index_t c) { return source.data() + c * stride; }, dst.data(), dst_stride);
  for (index_t d = 0; d < cols; ++d)
    for (index_t c = 0; c < dst_stride; ++c) {
      const T expected = c < rows ? source[static_cast<std::size_t>(c * stride + d)] : T(-1);  // padding untouched
      ASSERT_EQ(dst[static_cast<std::size_t>(d * dst_stride + c)], expected)
          << rows << "x" << cols << " at " << d << "," << c;
    }
}

TEST(TransposeRows, MatchesElementwiseDefinition) {
  for (index_t rows : {1, 7, 16, 17, 32, 40})
    for (index_t cols : {1, 15, 16, 33, 64, 70}) {
      expect_transposes<float>(rows, cols);
      expect_transposes<double>(rows, cols);
    }
}

template <class T>
void expect_finiteness_found_anywhere() {
  constexpr T kBad[] = {std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::infinity(),
                        -std::numeric_limits<T>::infinity()};
  for (index_t n : {1, 5, 8, 16, 37, 300}) {
    std::vector<T> x(static_cast<std::size_t>(n), T(1.5));
    EXPECT_TRUE(simd::all_finite(x.data(), n));
    x.front() = std::numeric_limits<T>::max();  // x - x is still 0
    x.back() = std::numeric_limits<T>::lowest();
    EXPECT_TRUE(simd::all_finite(x.data(), n));
    for (T bad : kBad) {
      for (index_t at = 0; at < n; ++at) {
        std::vector<T> y = x;
        y[static_cast<std::size_t>(at)] = bad;
        EXPECT_FALSE(simd::all_finite(y.data(), n)) << "n " << n << " at " << at << " value " << bad;
      }
    }
  }
}

TEST(AllFinite, DetectsNanAndInfAnywhere) {
  expect_finiteness_found_anywhere<float>();
  expect_finiteness_found_anywhere<double>();
}

TEST(CopyPaddedRow, CopiesPadsWithZerosAndDetectsNanAndInfAnywhere) {
  for (index_t n : {1, 5, 16, 37}) {
    const index_t padded = (n + 15) / 16 * 16;
    std::vector<float> x(static_cast<std::size_t>(n));
    for (index_t i = 0; i < n; ++i) x[static_cast<std::size_t>(i)] = 1.5f + static_cast<float>(i);
    alignas(64) float dst[48];
    std::fill(std::begin(dst), std::end(dst), -1.0f);
    EXPECT_TRUE(simd::copy_padded_row(x.data(), n, dst, padded));
    for (index_t i = 0; i < 48; ++i) {
      const float expected = i < n        ? x[static_cast<std::size_t>(i)]
                             : i < padded ? 0.0f
                                          : -1.0f;  // past padded untouched
      ASSERT_EQ(dst[i], expected) << "n " << n << " at " << i;
    }
    for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
      for (index_t at = 0; at < n; ++at) {
        std::vector<float> y = x;
        y[static_cast<std::size_t>(at)] = bad;
        EXPECT_FALSE(simd::copy_padded_row(y.data(), n, dst, padded)) << "n " << n << " at " << at;
      }
    }
  }
}

}  // namespace
}  // namespace attnkit::testing
