// kernel::KeyValuePanels::repack_positions (a sliding window replacing some of its key
// positions, as LSH's ring of chunks does) against packing every tile afresh with the new
// rows, and the tiles' non-finite flags it keeps.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "attnkit/kernel/key_value_panels.hpp"

namespace attnkit::testing {
namespace {

/// Panels over `positions` key positions of one (batch, head) of K and V [rows x dim], with
/// key position p holding row map[p] times 1 / (1 + map[p]).
struct PanelsProblem {
  PanelsProblem(index_t row_count, index_t head_dim, index_t key_positions, index_t key_rows)
      : rows(row_count), dim(head_dim), positions(key_positions), k(static_cast<std::size_t>(rows * dim)), v(k.size()) {
    for (std::size_t e = 0; e < k.size(); ++e) {
      k[e] = std::sin(0.37f * static_cast<float>(e)) + 0.25f;
      v[e] = std::cos(0.11f * static_cast<float>(e)) - 0.5f;
    }
    tiles = TileShape{32, key_rows};
  }
  AttentionShape shape() const { return {1, 1, 1, positions, rows, dim, dim}; }
  TensorView<const float> k_view() const { return bhld(k.data(), 1, 1, rows, dim); }
  TensorView<const float> v_view() const { return bhld(v.data(), 1, 1, rows, dim); }

  index_t rows, dim, positions;
  std::vector<float> k, v;
  TileShape tiles;
};

/// Everything the query tiles read: every tile's K^T panel and the packed V rows.
std::vector<float> snapshot(const kernel::KeyValuePanels<float>& panels, const PanelsProblem& problem) {
  std::vector<float> all;
  for (index_t t = 0; t < panels.tile_count(); ++t) {
    const float* panel = panels.key_panel(t);
    all.insert(all.end(), panel, panel + problem.tiles.key_rows * problem.dim);
  }
  const kernel::ValueRows<float> values = panels.value_rows(0, 0, 0);
  all.insert(all.end(), values.rows, values.rows + panels.tile_count() * problem.tiles.key_rows * values.stride);
  return all;
}

void pack_all(kernel::KeyValuePanels<float>& panels, const PanelsProblem& problem, const std::vector<index_t>& map) {
  for (index_t t = 0; t < panels.tile_count(); ++t) {
    panels.pack_tile(
        problem.k_view(), 0, 0, t, [&](index_t p) { return map[static_cast<std::size_t>(p)]; },
        [&](index_t p) { return 1.0f / (1.0f + static_cast<float>(map[static_cast<std::size_t>(p)])); });
  }
}

TEST(KeyValuePanels, RepackedPositionsEqualPackingEveryTileAfresh) {
  // One panel (128 positions in a 128-key tile) and a window over two tiles (300 positions
  // in 256-key tiles), ranges inside one tile, across the boundary, and the whole window.
  struct PanelCase {
    index_t positions, key_rows, first, count;
  };
  for (const PanelCase& c :
       {PanelCase{128, 128, 64, 64}, PanelCase{128, 128, 0, 64}, PanelCase{128, 128, 0, 128},
        PanelCase{300, 256, 200, 100}, PanelCase{300, 256, 256, 44}, PanelCase{300, 256, 17, 33}}) {
    PanelsProblem problem(500, 40, c.positions, c.key_rows);
    kernel::KeyValuePanels<float> panels(problem.shape(), problem.tiles, problem.v_view(), false, c.positions);
    std::vector<index_t> before(static_cast<std::size_t>(c.positions)), after(before.size());
    for (index_t p = 0; p < c.positions; ++p) {
      before[static_cast<std::size_t>(p)] = (7 * p + 3) % problem.rows;
      const bool replaced = p >= c.first && p < c.first + c.count;
      after[static_cast<std::size_t>(p)] = replaced ? (11 * p + 5) % problem.rows : before[static_cast<std::size_t>(p)];
    }
    pack_all(panels, problem, after);
    const std::vector<float> expected = snapshot(panels, problem);

    pack_all(panels, problem, before);
    ASSERT_NE(snapshot(panels, problem), expected);  // the case changes something
    panels.repack_positions(
        problem.k_view(), 0, 0, c.first, c.count, [&](index_t p) { return after[static_cast<std::size_t>(p)]; },
        [&](index_t p) { return 1.0f / (1.0f + static_cast<float>(after[static_cast<std::size_t>(p)])); });
    EXPECT_EQ(snapshot(panels, problem), expected)
        << c.positions << " positions, [" << c.first << ", +" << c.count << ")";
  }
}

TEST(KeyValuePanels, RepackingKeepsEachTilesNonFiniteFlagForAllItsRows) {
  PanelsProblem problem(64, 16, 128, 128);
  const index_t nan_row = 5;
  problem.v[static_cast<std::size_t>(nan_row * problem.dim + 3)] = std::numeric_limits<float>::quiet_NaN();
  kernel::KeyValuePanels<float> panels(problem.shape(), problem.tiles, problem.v_view(), false, problem.positions);
  std::vector<index_t> map(static_cast<std::size_t>(problem.positions), 1);
  const auto key_row = [&](index_t p) { return map[static_cast<std::size_t>(p)]; };
  pack_all(panels, problem, map);
  EXPECT_FALSE(panels.has_nonfinite_values(0, 0, 0));

  map[70] = nan_row;  // the NaN row enters with the repacked half
  panels.repack_positions(problem.k_view(), 0, 0, 64, 64, key_row, simd::Unscaled{});
  EXPECT_TRUE(panels.has_nonfinite_values(0, 0, 0));

  map[70] = 2;  // it stays in the half that is not repacked
  map[10] = nan_row;
  panels.repack_positions(problem.k_view(), 0, 0, 0, 64, key_row, simd::Unscaled{});
  panels.repack_positions(problem.k_view(), 0, 0, 64, 64, key_row, simd::Unscaled{});
  EXPECT_TRUE(panels.has_nonfinite_values(0, 0, 0));

  map[10] = 3;  // and leaves when its position is repacked with a finite row
  panels.repack_positions(problem.k_view(), 0, 0, 0, 64, key_row, simd::Unscaled{});
  EXPECT_FALSE(panels.has_nonfinite_values(0, 0, 0));
}

}  // namespace
}  // namespace attnkit::testing
