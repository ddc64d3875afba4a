// attnkit::attended_keys (pairs per row) and PatternCost::density for every pattern kind,
// against counts of the closed-form mask.

#include <gtest/gtest.h>

#include "attnkit/core/concepts.hpp"
#include "attnkit/core/cost.hpp"
#include "attnkit/core/errors.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/pattern/attended_keys.hpp"
#include "attnkit/pattern/big_bird.hpp"
#include "attnkit/pattern/block_sparse.hpp"
#include "attnkit/pattern/dilated.hpp"
#include "attnkit/pattern/full.hpp"
#include "attnkit/pattern/global.hpp"
#include "attnkit/pattern/intersection.hpp"
#include "attnkit/pattern/per_head.hpp"
#include "attnkit/pattern/sliding_window.hpp"
#include "attnkit/pattern/union.hpp"
#include "support/plan_checks.hpp"

namespace attnkit::testing {
namespace {

template <MaskedPattern P>
void expect_row_counts_and_density(const P& pattern, const AttentionShape& shape) {
  const auto mask = pattern.mask(shape);
  for (index_t h = 0; h < shape.q_heads; ++h)
    for (index_t i = 0; i < shape.q_len; ++i) {
      index_t expected = 0;
      for (index_t j = 0; j < shape.kv_len; ++j) expected += mask.multiplicity(h, i, j);
      ASSERT_EQ(attended_keys(pattern, shape, h, i), expected) << "head " << h << " row " << i;
    }
  const double all = static_cast<double>(shape.batch * shape.q_heads * shape.q_len * shape.kv_len);
  EXPECT_DOUBLE_EQ(pattern.cost(shape).density, count_mask_pairs(pattern, shape) / all);
}

TEST(AttendedKeys, EveryPatternKindCountsItsMask) {
  const AttentionShape shape{2, 2, 1, 150, 150, 8, 8};
  expect_row_counts_and_density(Full{.causal = true}, shape);
  expect_row_counts_and_density(SlidingWindow(5, 9), shape);
  expect_row_counts_and_density(Dilated(4, 2, {3, 1}), shape);
  expect_row_counts_and_density(Global({0, 77}), shape);
  expect_row_counts_and_density(BlockSparse::cyclic_shifts(16, 10, {0, 4}), shape);
  expect_row_counts_and_density(BigBird(16, 2, 9), shape);
  expect_row_counts_and_density(Union{Dilated(4, 2, {3, 1}), Global({0, 77})}, shape);
  expect_row_counts_and_density(Intersection{SlidingWindow(30, 30), Full{.causal = true}}, shape);
  expect_row_counts_and_density(PerHead<Full, SlidingWindow>({Full{}, SlidingWindow(2, 2)}), shape);
}

TEST(AttendedKeys, RejectsRowsAndHeadsOutsideTheShape) {
  const AttentionShape shape{1, 2, 1, 10, 10, 8, 8};
  expect_invalid_argument([&] { return attended_keys(Full{}, shape, 2, 0); }, "attended_keys: head = 2");
  expect_invalid_argument([&] { return attended_keys(Full{}, shape, 0, 10); }, "attended_keys: row = 10");
}

TEST(PatternCost, DensityOfAnEmptyCallIsZero) {
  EXPECT_EQ(Full{}.cost(AttentionShape{1, 1, 1, 0, 5, 8, 8}).density, 0.0);
  EXPECT_EQ(Full{}.cost(AttentionShape{1, 1, 1, 4, 5, 8, 8}).density, 1.0);
}

}  // namespace
}  // namespace attnkit::testing
