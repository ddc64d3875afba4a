// Counter-based randomness: multiply-high and bounded draws.

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "attnkit/core/rng.hpp"

namespace attnkit {
namespace {

__extension__ typedef unsigned __int128 Wide;  // the compiler's own 128-bit product as the oracle

TEST(Rng, MulHighMatchesA128BitProduct) {
  const std::uint64_t values[] = {0,
                                  1,
                                  2,
                                  0xffffffffull,
                                  0x100000000ull,
                                  0xffffffffffffffffull,
                                  0x9e3779b97f4a7c15ull,
                                  0x8000000000000000ull,
                                  12345678901234567ull};
  for (std::uint64_t a : values)
    for (std::uint64_t b : values) {
      EXPECT_EQ(mul_high(a, b), static_cast<std::uint64_t>((static_cast<Wide>(a) * b) >> 64)) << a << " * " << b;
    }
  for (std::uint64_t k = 0; k < 1000; ++k) {
    const std::uint64_t a = mix64(k), b = mix64(k + 1000);
    EXPECT_EQ(mul_high(a, b), static_cast<std::uint64_t>((static_cast<Wide>(a) * b) >> 64));
  }
}

TEST(Rng, UniformBelowStaysInRangeAndCoversIt) {
  for (index_t bound : {1, 2, 3, 7, 100}) {
    std::vector<int> hits(static_cast<std::size_t>(bound));
    for (std::uint64_t k = 0; k < 20000; ++k) {
      const index_t x = uniform_below(counter_random(1, 2, 3, k, 0), bound);
      ASSERT_GE(x, 0);
      ASSERT_LT(x, bound);
      ++hits[static_cast<std::size_t>(x)];
    }
    for (int h : hits)
      EXPECT_NEAR(h, 20000.0 / static_cast<double>(bound), 6 * std::sqrt(20000.0 / static_cast<double>(bound)) + 1);
  }
}

TEST(Rng, StreamsDependOnEveryKeyPart) {
  const std::uint64_t base = counter_random(1, 2, 3, 4, 5);
  EXPECT_NE(base, counter_random(9, 2, 3, 4, 5));
  EXPECT_NE(base, counter_random(1, 9, 3, 4, 5));
  EXPECT_NE(base, counter_random(1, 2, 9, 4, 5));
  EXPECT_NE(base, counter_random(1, 2, 3, 9, 5));
  EXPECT_NE(base, counter_random(1, 2, 3, 4, 9));
  EXPECT_EQ(base, counter_random(1, 2, 3, 4, 5));
}

}  // namespace
}  // namespace attnkit
