// The float64 reference against hand-computed values and literal masks (SPEC.md sections 0, 1).

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "attnkit/core/cost.hpp"
#include "attnkit/core/options.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/core/tensor_view.hpp"
#include "attnkit/pattern/full.hpp"
#include "attnkit/reference/attention.hpp"
#include "support/plan_checks.hpp"

namespace attnkit {
namespace {

/// Literal 0/1 mask of Full{causal} for Lq x Lk, row by row, as written out by hand.
std::vector<std::vector<int>> mask_of(const Full& pattern, index_t lq, index_t lk) {
  return testing::mask_rows(pattern, AttentionShape{1, 1, 1, lq, lk, 1, 1});
}

TEST(FullMask, CausalSquareIsLowerTriangular) {
  EXPECT_EQ(mask_of(Full{.causal = true}, 3, 3), (std::vector<std::vector<int>>{{1, 0, 0}, {1, 1, 0}, {1, 1, 1}}));
}

TEST(FullMask, CausalIsBottomRightWhenFewerQueries) {
  // Lq = 2, Lk = 4: query i sits at key position i + 2.
  EXPECT_EQ(mask_of(Full{.causal = true}, 2, 4), (std::vector<std::vector<int>>{{1, 1, 1, 0}, {1, 1, 1, 1}}));
}

TEST(FullMask, CausalIsBottomRightWhenMoreQueries) {
  // Lq = 4, Lk = 2: query i sits at key position i - 2; the first two rows are empty.
  EXPECT_EQ(mask_of(Full{.causal = true}, 4, 2), (std::vector<std::vector<int>>{{0, 0}, {0, 0}, {1, 0}, {1, 1}}));
}

TEST(FullMask, NonCausalIsAllOnes) {
  EXPECT_EQ(mask_of(Full{}, 2, 3), (std::vector<std::vector<int>>{{1, 1, 1}, {1, 1, 1}}));
}

TEST(FullCost, AttendedPairsCountTheMask) {
  for (bool causal : {false, true})
    for (index_t lq : {0, 1, 5, 64, 100})
      for (index_t lk : {0, 1, 7, 64, 130}) {
        const AttentionShape shape{2, 3, 1, lq, lk, 8, 4};
        const double pairs = testing::count_mask_pairs(Full{.causal = causal}, shape);
        const PatternCost cost = Full{.causal = causal}.cost(shape);
        EXPECT_EQ(cost.attended_pairs, pairs) << "causal " << causal << " Lq " << lq << " Lk " << lk;
        EXPECT_EQ(cost.flops, 2 * pairs * (8 + 4));
      }
}

TEST(Reference, TwoKeysByHand) {
  // sigma = 1, D = 1: logits 0 and ln 3, so weights 1/4 and 3/4; Z = 1 + 3, lse = ln 4.
  const double q[] = {1.0}, k[] = {0.0, std::log(3.0)}, v[] = {10.0, -2.0, 2.0, 6.0};
  double out[2] = {0, 0}, lse[1] = {0};
  reference::attention(Full{}, bhld(q, 1, 1, 1, 1), bhld(k, 1, 1, 2, 1), bhld(v, 1, 1, 2, 2), bhld(out, 1, 1, 1, 2),
                       lse_view(lse, 1, 1, 1), Options{.scale = 1.0});
  EXPECT_NEAR(out[0], 0.25 * 10.0 + 0.75 * 2.0, 1e-15);
  EXPECT_NEAR(out[1], 0.25 * -2.0 + 0.75 * 6.0, 1e-15);
  EXPECT_NEAR(lse[0], std::log(4.0), 1e-15);
}

TEST(Reference, DefaultScaleIsInverseSqrtD) {
  // D = 4, sigma = 1/2: q = (2, 0, 0, 0), k0 = 0, k1 = (ln 2, 0, 0, 0) -> logits 0 and ln 2.
  const double q[] = {2, 0, 0, 0}, k[] = {0, 0, 0, 0, std::log(2.0), 0, 0, 0}, v[] = {3.0, 6.0};
  double out[1] = {0};
  reference::attention(Full{}, bhld(q, 1, 1, 1, 4), bhld(k, 1, 1, 2, 4), bhld(v, 1, 1, 2, 1), bhld(out, 1, 1, 1, 1));
  EXPECT_NEAR(out[0], (1.0 * 3.0 + 2.0 * 6.0) / 3.0, 1e-14);
}

TEST(Reference, EmptyRowsAreZeroWithMinusInfinityLse) {
  const float q[] = {1, 2, 3}, k[] = {1}, v[] = {5};
  float out[3] = {9, 9, 9}, lse[3] = {9, 9, 9};
  // Lq = 3, Lk = 1, causal: rows 0 and 1 are empty, row 2 attends key 0.
  reference::attention(Full{.causal = true}, bhld(q, 1, 1, 3, 1), bhld(k, 1, 1, 1, 1), bhld(v, 1, 1, 1, 1),
                       bhld(out, 1, 1, 3, 1), lse_view(lse, 1, 1, 3));
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], 0.0f);
  EXPECT_EQ(out[2], 5.0f);
  EXPECT_EQ(lse[0], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(lse[1], -std::numeric_limits<float>::infinity());
  EXPECT_NEAR(lse[2], 3.0f, 1e-6f);  // one key, logit sigma * 3 * 1 = 3 (sigma = 1 / sqrt(1)): lse = 3
}

}  // namespace
}  // namespace attnkit
