#pragma once
// Checks of a pattern that run no kernel: its key-tile plan against its closed-form mask, the
// mask's counting interface, and the error every bad parameter must raise.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "attnkit/core/concepts.hpp"
#include "attnkit/core/errors.hpp"
#include "attnkit/core/plan_call.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/pattern/detail/plan_pair.hpp"

namespace attnkit::testing {

/// Expects make() to throw attnkit::invalid_argument whose message contains `fragment`.
template <class Make>
void expect_invalid_argument(Make&& make, const std::string& fragment) {
  try {
    make();
    ADD_FAILURE() << "no exception, expected one mentioning: " << fragment;
  } catch (const attnkit::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
  }
}

/// The 0/1/... mask of query head `head` as literal rows [Lq][Lk], for comparing with
/// hand-written masks.
template <MaskedPattern P>
std::vector<std::vector<int>> mask_rows(const P& pattern, const AttentionShape& shape, index_t head = 0) {
  const auto mask = pattern.mask(shape);
  std::vector<std::vector<int>> rows(static_cast<std::size_t>(shape.q_len),
                                     std::vector<int>(static_cast<std::size_t>(shape.kv_len)));
  for (index_t i = 0; i < shape.q_len; ++i)
    for (index_t j = 0; j < shape.kv_len; ++j) rows[i][j] = mask.multiplicity(head, i, j);
  return rows;
}

/// Attended pairs counted from the mask over batch, query heads and positions: the yardstick
/// of every pattern's closed-form cost().
template <MaskedPattern P>
double count_mask_pairs(const P& pattern, const AttentionShape& shape) {
  const auto mask = pattern.mask(shape);
  double pairs = 0;
  for (index_t h = 0; h < shape.q_heads; ++h)
    for (index_t i = 0; i < shape.q_len; ++i)
      for (index_t j = 0; j < shape.kv_len; ++j) pairs += mask.multiplicity(h, i, j);
  return pairs * static_cast<double>(shape.batch);
}

/// Whether a plan must list only tiles where some pair is attended (intersections may not).
enum class EmptyTiles { kForbidden, kAllowed };

/// Checks every contract of KeyTilePlan for one shape and tile geometry against the pattern's
/// closed-form mask: tiles in order, inside one aligned key run each; inside every tile the
/// plan's exclude() keeps exactly the attended keys (and an unmasked tile holds only attended
/// pairs); every attended pair lies in a visited tile. Positions are mapped to rows through
/// the plan's row order, which must be a permutation.
template <MaskedPattern P>
void expect_plan_matches_mask(const P& pattern, const AttentionShape& shape, const TileShape& tiles,
                              EmptyTiles empty_tiles = EmptyTiles::kForbidden) {
  const auto plan = pattern.plan(shape, tiles);
  const auto mask = pattern.mask(shape);
  SCOPED_TRACE(::testing::Message() << "Lq " << shape.q_len << " Lk " << shape.kv_len << " tiles " << tiles.query_rows
                                    << "x" << tiles.key_rows);
  const auto query_row = [&](index_t h, index_t p) { return attnkit::query_row(plan, h, p); };
  const auto key_row = [&](index_t h, index_t p) { return attnkit::key_row(plan, h, p); };
  for (index_t h = 0; h < shape.q_heads; ++h) {
    std::set<index_t> query_rows, key_rows;
    for (index_t p = 0; p < shape.q_len; ++p) query_rows.insert(query_row(h, p));
    for (index_t p = 0; p < shape.kv_len; ++p) key_rows.insert(key_row(h, p));
    ASSERT_EQ(static_cast<index_t>(query_rows.size()), shape.q_len) << "query order is not a permutation";
    ASSERT_EQ(static_cast<index_t>(key_rows.size()), shape.kv_len) << "key order is not a permutation";
    if (shape.q_len > 0) {
      ASSERT_GE(*query_rows.begin(), 0);
      ASSERT_LT(*query_rows.rbegin(), shape.q_len);
    }
    if (shape.kv_len > 0) {
      ASSERT_GE(*key_rows.begin(), 0);
      ASSERT_LT(*key_rows.rbegin(), shape.kv_len);
    }
    for (index_t other = 0; other < shape.q_heads; ++other) {
      if (attnkit::key_order(plan, other) != attnkit::key_order(plan, h)) continue;
      for (index_t p = 0; p < shape.kv_len; ++p) {
        ASSERT_EQ(key_row(other, p), key_row(h, p)) << "heads " << h << ", " << other << " share an order id";
      }
    }

    // The plan's key tiles of query positions [q_begin, q_end) against the mask.
    const auto check_rows = [&](index_t q_begin, index_t q_end) {
      SCOPED_TRACE(::testing::Message() << "head " << h << " query positions [" << q_begin << ", " << q_end << ")");
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
        for (index_t p = q_begin; p < q_end; ++p) {
          std::vector<float> row(static_cast<std::size_t>(tile.end - tile.begin), 0.0f);
          if (tile.needs_mask) plan.exclude(h, p, tile, row.data());
          for (index_t c = 0; c < tile.end - tile.begin; ++c) {
            const bool kept = row[static_cast<std::size_t>(c)] == 0.0f;
            const index_t i = query_row(h, p), j = key_row(h, tile.begin + c);
            ASSERT_EQ(kept, mask.multiplicity(h, i, j) > 0)
                << "pair " << i << "," << j << " (positions " << p << "," << tile.begin + c << ") in a tile "
                << (tile.needs_mask ? "with" : "without") << " mask";
            ASSERT_TRUE(kept || row[static_cast<std::size_t>(c)] == -std::numeric_limits<float>::infinity());
            any_pair |= kept;
          }
        }
        for (index_t c = tile.begin; c < tile.end; ++c) keys.insert(c);
        if (empty_tiles == EmptyTiles::kForbidden) {
          EXPECT_TRUE(any_pair) << "tile [" << tile.begin << "," << tile.end << ") attends nothing";
        }
      }
      // Every attended pair lies in a visited tile, and in the query's reach when the plan
      // bounds it (ReachBoundedPlan).
      for (index_t p = q_begin; p < q_end; ++p)
        for (index_t c = 0; c < shape.kv_len; ++c)
          if (mask.multiplicity(h, query_row(h, p), key_row(h, c)) > 0) {
            ASSERT_TRUE(keys.count(c)) << "pair at positions " << p << "," << c << " not visited";
            ASSERT_TRUE(attnkit::detail::may_reach(plan, h, p, KeyTile{c, c + 1, true}))
                << "pair at positions " << p << "," << c << " outside the query's key_reach";
          }
    };
    for (index_t q_begin = 0; q_begin < shape.q_len; q_begin += tiles.query_rows) {
      const index_t q_end = std::min(q_begin + tiles.query_rows, shape.q_len);
      check_rows(q_begin, q_end);
      // A RowSplittingPlan's runs partition the tile, in order, and plan correctly alone.
      std::vector<KeyRange> runs;
      attnkit::for_each_row_run(plan, h, q_begin, q_end, [&](const KeyRange& run) { runs.push_back(run); });
      ASSERT_FALSE(runs.empty());
      ASSERT_EQ(runs.front().begin, q_begin);
      ASSERT_EQ(runs.back().end, q_end);
      for (std::size_t r = 0; r < runs.size(); ++r) {
        ASSERT_LT(runs[r].begin, runs[r].end) << "empty run";
        if (r > 0) {
          ASSERT_EQ(runs[r].begin, runs[r - 1].end) << "runs do not partition the tile";
        }
        if (runs.size() > 1) check_rows(runs[r].begin, runs[r].end);
      }
    }
  }
}

/// The counting interface of a mask (CountingMask) against its multiplicities, for every row
/// and a few key ranges: count() sums them, for_each_span() lists exactly the attended keys.
template <MaskedPattern P>
void expect_counts_match_mask(const P& pattern, const AttentionShape& shape) {
  const auto mask = pattern.mask(shape);
  const index_t n = shape.kv_len;
  for (index_t h = 0; h < shape.q_heads; ++h)
    for (index_t i = 0; i < shape.q_len; ++i) {
      std::vector<int> from_spans(static_cast<std::size_t>(n), 0);
      index_t previous_end = -1;
      mask.for_each_span(h, i, [&](const KeyRange& span) {
        ASSERT_LT(span.begin, span.end);
        ASSERT_GT(span.begin, previous_end - 1) << "spans overlap or go backwards";
        previous_end = span.end;
        for (index_t j = span.begin; j < span.end; ++j) from_spans[static_cast<std::size_t>(j)] = 1;
      });
      for (index_t j = 0; j < n; ++j) {
        ASSERT_EQ(from_spans[static_cast<std::size_t>(j)], mask.multiplicity(h, i, j) > 0 ? 1 : 0)
            << "head " << h << " row " << i << " key " << j;
      }
      for (const KeyRange keys : {KeyRange{0, n}, KeyRange{n / 3, n / 3 + n / 2}, KeyRange{n / 2, n / 2}}) {
        index_t expected = 0;
        for (index_t j = keys.begin; j < keys.end; ++j) expected += mask.multiplicity(h, i, j);
        ASSERT_EQ(mask.count(h, i, keys), expected) << "head " << h << " row " << i;
      }
    }
}

}  // namespace attnkit::testing
