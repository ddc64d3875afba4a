#pragma once
// Counter-based random numbers (SPEC.md section 0): a value depends only on its key, never on
// call order or thread count.

#include <cmath>
#include <cstdint>

#include "attnkit/core/index.hpp"

namespace attnkit {

/// SplitMix64's output function (Steele, Lea, Flood, "Fast splittable pseudorandom number
/// generators", OOPSLA 2014): a bijective 64-bit mix.
constexpr std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// The `draw`-th 64-bit value of the stream keyed by (seed, layer, head, index).
constexpr std::uint64_t counter_random(std::uint64_t seed, std::uint64_t layer, std::uint64_t head, std::uint64_t index,
                                       std::uint64_t draw) {
  return mix64(mix64(mix64(mix64(mix64(seed) ^ layer) ^ head) ^ index) ^ draw);
}

/// The high 64 bits of the 128-bit product a * b, from 32-bit halves (portable C++).
constexpr std::uint64_t mul_high(std::uint64_t a, std::uint64_t b) {
  const std::uint64_t a_lo = a & 0xffffffffull, a_hi = a >> 32, b_lo = b & 0xffffffffull, b_hi = b >> 32;
  const std::uint64_t hi_lo = a_hi * b_lo;
  const std::uint64_t cross = ((a_lo * b_lo) >> 32) + (hi_lo & 0xffffffffull) + a_lo * b_hi;
  return a_hi * b_hi + (hi_lo >> 32) + (cross >> 32);
}

/// An integer in [0, bound) from 64 random bits by multiply-high (Lemire 2019); the bias is at
/// most bound / 2^64, far below anything a test or a model could see.
constexpr index_t uniform_below(std::uint64_t bits, index_t bound) {
  return static_cast<index_t>(mul_high(bits, static_cast<std::uint64_t>(bound)));
}

/// A uniform double in (0, 1) from the top 53 bits of `bits` (never 0 or 1).
constexpr double unit_interval(std::uint64_t bits) { return (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53; }

/// An N(0, 1) sample keyed by (seed, layer, head, index), by Box-Muller from the stream's
/// draws 0 and 1.
inline double normal_from_counter(std::uint64_t seed, std::uint64_t layer, std::uint64_t head, std::uint64_t index) {
  const double u1 = unit_interval(counter_random(seed, layer, head, index, 0));
  const double u2 = unit_interval(counter_random(seed, layer, head, index, 1));
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586476925286766559 * u2);
}

}  // namespace attnkit
