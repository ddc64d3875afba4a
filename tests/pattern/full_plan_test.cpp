// Property test: Full's key-tile plan agrees with its predicate and mask (DESIGN.md: the
// predicate is the ground truth, the tile enumeration must match it).

#include <gtest/gtest.h>

#include <vector>

#include "attnkit/core/rng.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/pattern/full.hpp"
#include "support/plan_checks.hpp"
#include "support/test_data.hpp"

namespace attnkit {
namespace {

TEST(FullPlan, AgreesWithPredicateOverRandomShapes) {
  for (std::uint64_t trial = 0; trial < 200; ++trial) {
    const auto draw = [&](std::uint64_t stream, index_t limit) {
      return static_cast<index_t>(mix64(trial * 16 + stream) % static_cast<std::uint64_t>(limit));
    };
    const AttentionShape shape{1, 1, 1, draw(1, 300), draw(2, 300), 4, 4};
    const TileShape tiles{1 + draw(3, 96), 1 + draw(4, 160)};
    for (bool causal : {false, true}) testing::expect_plan_matches_mask(Full{.causal = causal}, shape, tiles);
  }
}

TEST(FullPlan, CausalSkipsTilesAboveTheDiagonal) {
  const AttentionShape shape{1, 1, 1, 512, 512, 64, 64};
  const auto plan = Full{.causal = true}.plan(shape, TileShape{64, 64});
  std::vector<KeyTile> visited;
  plan.for_each_key_tile(0, 128, 192, [&](const KeyTile& tile) { visited.push_back(tile); });
  // Query rows 128..191 attend keys 0..191: two full tiles below the diagonal, one masked.
  EXPECT_EQ(visited, (std::vector<KeyTile>{{0, 64, false}, {64, 128, false}, {128, 192, true}}));
}

}  // namespace
}  // namespace attnkit
