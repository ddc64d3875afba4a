// simd::lane_sums, the reduction behind decode's scores, for 1 to 16 accumulators (one AVX-512
// vector's worth; several vectors' with narrower instruction sets): each sum against the
// float64 sum of its lanes. Every lane of every accumulator holds a different value, so a
// reduction that drops a lane, adds one twice or puts one accumulator's sum in another's place
// misses the bound by far more than rounding.

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <limits>
#include <utility>

#include "attnkit/simd/batch.hpp"

namespace attnkit::testing {
namespace {

template <std::size_t kCount>
void expect_lane_sums() {
  constexpr std::size_t kW = simd::kWidth<float>;
  simd::Batch<float> acc[kCount];
  double expected[kCount], size[kCount];
  for (std::size_t e = 0; e < kCount; ++e) {
    alignas(64) float lanes[kW];
    expected[e] = size[e] = 0;
    for (std::size_t l = 0; l < kW; ++l) {
      lanes[l] =
          static_cast<float>(std::cos(0.37 * static_cast<double>(e * kW + l)) * std::ldexp(1.0, static_cast<int>(e)));
      expected[e] += lanes[l];
      size[e] += std::abs(lanes[l]);
    }
    acc[e] = simd::Batch<float>::load_aligned(lanes);
  }
  float sums[(kCount + kW - 1) / kW * kW];
  simd::lane_sums(acc, sums);
  // Each lane passes through at most log2(16) = 4 additions (a tree, or haddp after folding
  // a wider vector): |error| <= 4 u sum |lane| to first order; 5 u leaves room.
  constexpr double u = std::numeric_limits<float>::epsilon() / 2;
  for (std::size_t e = 0; e < kCount; ++e)
    EXPECT_NEAR(sums[e], expected[e], 5 * u * size[e]) << kCount << " accumulators, sum " << e;
}

TEST(LaneSumsTest, EveryAccumulatorCountSumsEachAccumulatorsLanes) {
  [&]<std::size_t... kMinusOne>(std::index_sequence<kMinusOne...>) { (expect_lane_sums<kMinusOne + 1>(), ...); }
  (std::make_index_sequence<16>{});
}

}  // namespace
}  // namespace attnkit::testing
