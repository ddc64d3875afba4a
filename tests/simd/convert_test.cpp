// simd::widen_row and simd::narrow_row against the scalar conversions of core/half.hpp, bit for
// bit, over every 16-bit pattern and every tail length of a vector (this file is compiled for
// the baseline and for -march=native, so both the SSE2 and the widest paths run).

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <vector>

#include "attnkit/core/half.hpp"
#include "attnkit/core/index.hpp"
#include "attnkit/simd/convert.hpp"

namespace attnkit::testing {
namespace {

template <class H>
void expect_widen_row_matches_to_float() {
  std::vector<H> all(65536);
  for (std::uint32_t bits = 0; bits < 65536; ++bits) all[bits] = H{static_cast<std::uint16_t>(bits)};
  // Every offset and length up to two AVX-512 vectors, then the whole table at once.
  for (index_t first = 0; first < 17; ++first) {
    for (index_t n = 0; n <= 33; ++n) {
      std::vector<float> wide(static_cast<std::size_t>(n) + 1, -1.0f);
      simd::widen_row(all.data() + first * 997, n, wide.data());
      for (index_t i = 0; i < n; ++i) {
        ASSERT_EQ(std::bit_cast<std::uint32_t>(wide[static_cast<std::size_t>(i)]),
                  std::bit_cast<std::uint32_t>(to_float(all[static_cast<std::size_t>(first * 997 + i)])))
            << "first " << first << " n " << n << " i " << i;
      }
      ASSERT_EQ(wide[static_cast<std::size_t>(n)], -1.0f) << "wrote past n = " << n;
    }
  }
  std::vector<float> wide(all.size());
  simd::widen_row(all.data(), static_cast<index_t>(all.size()), wide.data());
  for (std::size_t i = 0; i < all.size(); ++i)
    ASSERT_EQ(std::bit_cast<std::uint32_t>(wide[i]), std::bit_cast<std::uint32_t>(to_float(all[i]))) << i;
}

TEST(Convert, WidenRowIsToFloatForEveryBfloat16) { expect_widen_row_matches_to_float<bfloat16>(); }
TEST(Convert, WidenRowIsToFloatForEveryFloat16) { expect_widen_row_matches_to_float<float16>(); }

/// narrow_row stores each float as store_as does (round to nearest even), here on every
/// widened half value and the midpoints between neighbours (ties) of both types.
template <class H>
void expect_narrow_row_matches_store_as() {
  std::vector<float> values;
  for (std::uint32_t bits = 0; bits < 65536; ++bits) {
    const float x = to_float(H{static_cast<std::uint16_t>(bits)});
    values.push_back(x);
    values.push_back(
        std::bit_cast<float>(std::bit_cast<std::uint32_t>(x) + (std::same_as<H, bfloat16> ? 0x8000u : 0x1000u)));
  }
  std::vector<H> narrow(values.size());
  simd::narrow_row(values.data(), static_cast<index_t>(values.size()), narrow.data());
  for (std::size_t i = 0; i < values.size(); ++i) ASSERT_EQ(narrow[i].bits, store_as<H>(values[i]).bits) << i;
}

TEST(Convert, NarrowRowRoundsLikeStoreAs) {
  expect_narrow_row_matches_store_as<bfloat16>();
  expect_narrow_row_matches_store_as<float16>();
}

}  // namespace
}  // namespace attnkit::testing
