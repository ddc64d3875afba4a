// Property test: Full's key-tile plan agrees with its predicate and mask (DESIGN.md: the
// predicate is the ground truth, the tile enumeration must match it).

#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "attnkit/attnkit.hpp"
#include "support/test_data.hpp"

namespace attnkit {
namespace {

/// Checks every contract of KeyTilePlan for one shape and tile geometry.
template <AttentionPattern P>
void expect_plan_matches_predicate(const P& pattern, const AttentionShape& shape, const TileShape& tiles) {
  const auto plan = pattern.plan(shape, tiles);
  const auto mask = pattern.mask(shape);
  SCOPED_TRACE(::testing::Message() << "Lq " << shape.q_len << " Lk " << shape.kv_len << " tiles "
                                    << tiles.query_rows << "x" << tiles.key_rows);
  for (index_t h = 0; h < shape.q_heads; ++h) {
    for (index_t q_begin = 0; q_begin < shape.q_len; q_begin += tiles.query_rows) {
      const index_t q_end = std::min(q_begin + tiles.query_rows, shape.q_len);
      std::vector<KeyTile> visited;
      plan.for_each_key_tile(h, q_begin, q_end, [&](const KeyTile& tile) { visited.push_back(tile); });
      std::set<index_t> keys;
      index_t previous_end = 0;
      for (const KeyTile& tile : visited) {
        ASSERT_LT(tile.begin, tile.end);
        ASSERT_GE(tile.begin, previous_end) << "tiles overlap or go backwards";
        ASSERT_LE(tile.end, shape.kv_len);
        ASSERT_EQ(tile.begin / tiles.key_rows, (tile.end - 1) / tiles.key_rows) << "tile crosses an aligned key tile";
        previous_end = tile.end;
        bool any_pair = false;
        for (index_t j = tile.begin; j < tile.end; ++j) {
          keys.insert(j);
          for (index_t i = q_begin; i < q_end; ++i) {
            const bool allowed = plan.allows(h, i, j);
            ASSERT_EQ(allowed, mask.multiplicity(h, i, j) > 0) << "predicate and mask disagree at " << i << "," << j;
            if (!tile.needs_mask) {
              ASSERT_TRUE(allowed) << "unmasked tile holds an excluded pair " << i << "," << j;
            }
            any_pair |= allowed;
          }
        }
        EXPECT_TRUE(any_pair) << "tile [" << tile.begin << "," << tile.end << ") attends nothing";
      }
      // A plan that reports row intervals reports exactly the allowed keys.
      if constexpr (RowIntervalPlan<decltype(plan)>) {
        for (index_t i = q_begin; i < q_end; ++i) {
          const KeyRange interval = plan.row_interval(h, i);
          for (index_t j = 0; j < shape.kv_len; ++j) {
            ASSERT_EQ(plan.allows(h, i, j), interval.begin <= j && j < interval.end) << "row " << i << " key " << j;
          }
        }
      }
      // Every attended pair lies in a visited tile.
      for (index_t i = q_begin; i < q_end; ++i)
        for (index_t j = 0; j < shape.kv_len; ++j)
          if (mask.multiplicity(h, i, j) > 0) {
            ASSERT_TRUE(keys.count(j)) << "pair " << i << "," << j << " not visited";
          }
    }
  }
}

TEST(FullPlan, AgreesWithPredicateOverRandomShapes) {
  for (std::uint64_t trial = 0; trial < 200; ++trial) {
    const auto draw = [&](std::uint64_t stream, index_t limit) {
      return static_cast<index_t>(testing::splitmix64(trial * 16 + stream) % static_cast<std::uint64_t>(limit));
    };
    const AttentionShape shape{1, 1, 1, draw(1, 300), draw(2, 300), 4, 4};
    const TileShape tiles{1 + draw(3, 96), 1 + draw(4, 160)};
    for (bool causal : {false, true}) expect_plan_matches_predicate(Full{.causal = causal}, shape, tiles);
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
