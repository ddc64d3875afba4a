// bfloat16 and float16 conversions (core/half.hpp) against values computed here from the
// formats' definitions (docs/SPEC.md "Element types"): every one of the 65536 bit patterns of
// each type widened, and narrowing from float checked against the nearest representable value
// found by search in double, over every half value, every midpoint between neighbours and the
// floats next to it, a stride through all 2^32 float bit patterns and the special values. The
// test compiles for the baseline and for -march=native (F16C there), and the portable
// bit-level conversions must equal the public ones bit for bit on both.

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "attnkit/core/half.hpp"

namespace attnkit {
namespace {

/// A format's fields: the value of a bit pattern and the largest finite pattern.
struct Format {
  int exponent_bits, fraction_bits;
  std::uint32_t max_finite() const {
    return ((1u << exponent_bits) - 2) << fraction_bits | ((1u << fraction_bits) - 1);
  }
  std::uint32_t infinity() const { return ((1u << exponent_bits) - 1) << fraction_bits; }
  std::uint32_t sign_bit() const { return 1u << (exponent_bits + fraction_bits); }
  int bias() const { return (1 << (exponent_bits - 1)) - 1; }

  /// (-1)^s 2^(e - bias) (1 + m / 2^fraction_bits), or 2^(1 - bias) m / 2^fraction_bits for
  /// e = 0, in double (exact for both formats). Only for finite patterns.
  double value(std::uint32_t bits) const {
    const std::uint32_t fraction = bits & ((1u << fraction_bits) - 1);
    const std::uint32_t exponent = (bits >> fraction_bits) & ((1u << exponent_bits) - 1);
    const double magnitude = exponent == 0 ? std::ldexp(static_cast<double>(fraction), 1 - bias() - fraction_bits)
                                           : std::ldexp(1.0 + std::ldexp(static_cast<double>(fraction), -fraction_bits),
                                                        static_cast<int>(exponent) - bias());
    return (bits & sign_bit()) != 0 ? -magnitude : magnitude;
  }

  /// The nearest representable pattern to finite or infinite x, ties to the even pattern;
  /// beyond the largest finite value rounding continues as if the exponent were unbounded (the
  /// next value up is 2^(emax + 1), pattern infinity()), as IEEE 754 rounds.
  std::uint32_t nearest(float x) const {
    const std::uint32_t sign = std::signbit(x) ? sign_bit() : 0u;
    const double a = std::fabs(static_cast<double>(x));
    if (std::isinf(a)) return sign | infinity();
    std::uint32_t low = 0, high = max_finite();  // largest pattern with value <= a, by bisection
    if (value(high) <= a) {
      low = high;
    } else {
      while (high - low > 1) {
        const std::uint32_t middle = (low + high) / 2;
        (value(middle) <= a ? low : high) = middle;
      }
    }
    const double below = value(low);
    if (below == a) return sign | low;
    const double above = low == max_finite() ? std::ldexp(1.0, bias() + 1) : value(low + 1);
    const double to_below = a - below, to_above = above - a;
    const bool up = to_above < to_below || (to_above == to_below && (low & 1u) != 0);
    return sign | (up ? low + 1 : low);
  }
};
constexpr Format kBfloat16Format{8, 7};
constexpr Format kFloat16Format{5, 10};

std::uint32_t bits_of(float x) { return std::bit_cast<std::uint32_t>(x); }

/// A NaN pattern of a format widened: a quiet float NaN with the same sign and the payload in
/// the top fraction bits.
void expect_widened_nan(const Format& format, std::uint32_t bits, float widened) {
  ASSERT_TRUE(std::isnan(widened)) << std::hex << bits;
  const std::uint32_t f = bits_of(widened);
  EXPECT_EQ(f >> 31, (bits & format.sign_bit()) != 0 ? 1u : 0u) << std::hex << bits;
  EXPECT_NE(f & 0x00400000u, 0u) << "quiet bit, pattern " << std::hex << bits;
  const std::uint32_t payload = bits & ((1u << format.fraction_bits) - 1);
  EXPECT_EQ((f & 0x003FFFFFu) >> (23 - format.fraction_bits), payload & ((1u << (format.fraction_bits - 1)) - 1))
      << std::hex << bits;
}

TEST(HalfTypes, WideningIsExactForEveryBfloat16Pattern) {
  for (std::uint32_t bits = 0; bits < 0x10000u; ++bits) {
    const float widened = to_float(bfloat16{static_cast<std::uint16_t>(bits)});
    if ((bits & 0x7FFFu) > kBfloat16Format.infinity()) {
      // bfloat16 widening is a shift: a signalling NaN stays signalling, bit for bit.
      ASSERT_EQ(bits_of(widened), bits << 16) << std::hex << bits;
    } else if ((bits & 0x7FFFu) == kBfloat16Format.infinity()) {
      ASSERT_EQ(widened, (bits & 0x8000u) != 0 ? -HUGE_VALF : HUGE_VALF) << std::hex << bits;
    } else {
      ASSERT_EQ(static_cast<double>(widened), kBfloat16Format.value(bits)) << std::hex << bits;
      ASSERT_EQ(std::signbit(widened), (bits & 0x8000u) != 0) << std::hex << bits;
    }
  }
}

TEST(HalfTypes, WideningIsExactForEveryFloat16Pattern) {
  for (std::uint32_t bits = 0; bits < 0x10000u; ++bits) {
    const auto h = static_cast<std::uint16_t>(bits);
    const float widened = to_float(float16{h});
    ASSERT_EQ(bits_of(widened), bits_of(detail::float16_to_float(h))) << "hardware and portable differ at " << bits;
    if ((bits & 0x7FFFu) > kFloat16Format.infinity()) {
      expect_widened_nan(kFloat16Format, bits, widened);
    } else if ((bits & 0x7FFFu) == kFloat16Format.infinity()) {
      ASSERT_EQ(widened, (bits & 0x8000u) != 0 ? -HUGE_VALF : HUGE_VALF) << std::hex << bits;
    } else {
      ASSERT_EQ(static_cast<double>(widened), kFloat16Format.value(bits)) << std::hex << bits;
      ASSERT_EQ(std::signbit(widened), (bits & 0x8000u) != 0) << std::hex << bits;
    }
  }
}

/// Floats to narrow: every finite value of the format and its negation, each midpoint between
/// neighbours (ties) and the floats either side of it, the midpoint past the largest finite
/// value, a stride through every float bit pattern (NaN included) and the special values.
std::vector<float> narrowing_inputs(const Format& format) {
  std::vector<float> inputs;
  for (std::uint32_t bits = 0; bits <= format.max_finite(); ++bits) {
    const double here = format.value(bits);
    const double next = bits == format.max_finite() ? std::ldexp(1.0, format.bias() + 1) : format.value(bits + 1);
    const auto midpoint = static_cast<float>((here + next) / 2);  // exact: 2 more bits than the format
    for (const float x :
         {static_cast<float>(here), midpoint, std::nextafter(midpoint, 0.0f), std::nextafter(midpoint, HUGE_VALF)}) {
      inputs.push_back(x);
      inputs.push_back(-x);
    }
  }
  for (std::uint64_t bits = 0; bits < (1ull << 32); bits += 2039) {
    inputs.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(bits)));
  }
  for (const float x : {0.0f, HUGE_VALF, std::numeric_limits<float>::max(), std::numeric_limits<float>::min(),
                        std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::quiet_NaN(),
                        std::numeric_limits<float>::signaling_NaN(), std::bit_cast<float>(0x7FFFFFFFu),
                        std::bit_cast<float>(0x7F800001u), std::bit_cast<float>(0x7FC00001u)}) {
    inputs.push_back(x);
    inputs.push_back(-x);
  }
  return inputs;
}

/// A float NaN narrowed: a quiet NaN of the format with the same sign and the top of the payload.
void expect_narrowed_nan(const Format& format, float x, std::uint32_t narrowed) {
  const std::uint32_t f = bits_of(x);
  const std::uint32_t fraction_mask = (1u << format.fraction_bits) - 1;
  const std::uint32_t quiet = 1u << (format.fraction_bits - 1);
  EXPECT_EQ(narrowed & ~(format.sign_bit() | fraction_mask), format.infinity()) << std::hex << f;
  EXPECT_EQ((narrowed & format.sign_bit()) != 0, (f >> 31) != 0) << std::hex << f;
  EXPECT_NE(narrowed & quiet, 0u) << std::hex << f;
  EXPECT_EQ(narrowed & (quiet - 1), (f >> (23 - format.fraction_bits)) & (quiet - 1)) << std::hex << f;
}

/// narrow(x) (the public conversion) over narrowing_inputs(format): equal to portable(x) bit
/// for bit, and the nearest value (or a quiet NaN) as the format defines it.
template <class Narrow, class Portable>
void expect_rounds_to_nearest_even(const Format& format, Narrow narrow, Portable portable) {
  std::size_t checked = 0;
  for (const float x : narrowing_inputs(format)) {
    const std::uint32_t narrowed = narrow(x);
    ASSERT_EQ(narrowed, portable(x)) << "hardware and portable differ at " << std::hex << bits_of(x);
    if (std::isnan(x)) {
      expect_narrowed_nan(format, x, narrowed);
    } else {
      ASSERT_EQ(narrowed, format.nearest(x)) << "x = " << x << " (bits " << std::hex << bits_of(x) << ")";
    }
    ++checked;
  }
  EXPECT_GT(checked, 2'000'000u);
}

TEST(HalfTypes, NarrowingToBfloat16RoundsToNearestEven) {
  expect_rounds_to_nearest_even(
      kBfloat16Format, [](float x) { return to_bfloat16(x).bits; }, detail::float_to_bfloat16);
}

TEST(HalfTypes, NarrowingToFloat16RoundsToNearestEven) {
  expect_rounds_to_nearest_even(
      kFloat16Format, [](float x) { return to_float16(x).bits; }, detail::float_to_float16);
}

TEST(HalfTypes, LandmarksOfTheFormats) {
  // float16: the largest finite value, the overflow threshold (65520, a tie, to even: inf),
  // the smallest subnormal and the tie below it; bfloat16 keeps float subnormals.
  EXPECT_EQ(to_float16(65504.0f).bits, 0x7BFFu);
  EXPECT_EQ(to_float16(65519.996f).bits, 0x7BFFu);
  EXPECT_EQ(to_float16(65520.0f).bits, 0x7C00u);
  EXPECT_EQ(to_float16(-1e6f).bits, 0xFC00u);
  EXPECT_EQ(to_float16(0x1.0p-24f).bits, 0x0001u);
  EXPECT_EQ(to_float16(0x1.0p-25f).bits, 0x0000u);
  EXPECT_EQ(to_float16(0x1.8p-25f).bits, 0x0001u);
  EXPECT_EQ(to_float(float16{0x3C00u}), 1.0f);
  EXPECT_EQ(to_bfloat16(std::numeric_limits<float>::denorm_min()).bits, 0x0000u);
  EXPECT_EQ(to_bfloat16(std::bit_cast<float>(0x00010000u)).bits, 0x0001u);
  EXPECT_EQ(to_bfloat16(std::numeric_limits<float>::max()).bits, 0x7F80u);
  EXPECT_EQ(to_float(bfloat16{0x3F80u}), 1.0f);
  // Usable in constant expressions (the portable path).
  static_assert(to_float(to_float16(0.5f)) == 0.5f && to_float(to_bfloat16(-2.0f)) == -2.0f);
  static_assert(narrow<float16>(1.0f).bits == 0x3C00u && narrow<bfloat16>(1.0f).bits == 0x3F80u);
}

}  // namespace
}  // namespace attnkit
