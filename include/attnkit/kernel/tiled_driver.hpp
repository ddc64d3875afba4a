#pragma once
// The tiled online-softmax driver: executes any KeyTilePlan (SPEC.md section 1 algorithm).

#include <algorithm>
#include <limits>

#include "attnkit/core/concepts.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/core/tensor_view.hpp"
#include "attnkit/detail/thread_scratch.hpp"
#include "attnkit/kernel/key_value_panels.hpp"
#include "attnkit/kernel/online_softmax.hpp"
#include "attnkit/parallel/team.hpp"
#include "attnkit/simd/batch.hpp"
#include "attnkit/simd/score_tile.hpp"
#include "attnkit/simd/value_accumulate.hpp"

namespace attnkit::kernel {

/// Tile geometry of the driver. 32 query rows: the masked triangles at the edges of a band
/// (windows, causal diagonals) waste about query_rows / (band width + query_rows) of the work,
/// and measured full attention is as fast as with 64 rows. 128 keys per tile amortise the
/// per-row softmax bookkeeping (max, rescale) over more FMAs.
template <class T>
constexpr TileShape default_tile_shape() {
  return TileShape{32, 128};
}

/// One call's arguments as the driver sees them (validated by the front door).
template <class T>
struct TiledCall {
  AttentionShape shape;
  TensorView<const T> q, k, v;
  TensorView<T> out;
  const TensorView<T>* lse;  // nullptr: no log-sum-exp requested
  T scale;                   // sigma of SPEC.md section 0
  int threads;               // resolved thread count
};

namespace detail {

/// Per-thread scratch of one query tile: scaled Q rows, the score tile and the softmax state
/// (detail::thread_scratch, reused across calls).
template <class T>
struct QueryTileWorkspace {
  QueryTileWorkspace(const AttentionShape& shape, const TileShape& tiles, index_t value_stride)
      : queries(attnkit::detail::thread_scratch<struct QueryTileTag, T>(tiles.query_rows * shape.head_dim)),
        scores(attnkit::detail::thread_scratch<struct ScoreTileTag, T>(tiles.query_rows * tiles.key_rows)),
        softmax(tiles.query_rows, value_stride) {}
  T* queries;  // [query_rows x head_dim], rows past the tile zero
  T* scores;   // [query_rows x key_rows], scores then weights
  OnlineSoftmax<T> softmax;
};

template <class T>
inline constexpr T kExcluded = -std::numeric_limits<T>::infinity();

/// Sets the scores of row i's keys in `tile` that the plan excludes to -inf (selection: the
/// excluded scores, possibly NaN, are overwritten, never combined arithmetically).
template <class T, KeyTilePlan Plan>
void exclude_masked(const Plan& plan, index_t h, index_t i, const KeyTile& tile, T* row) {
  const index_t keys = tile.end - tile.begin;
  if constexpr (RowIntervalPlan<Plan>) {
    const KeyRange allowed = plan.row_interval(h, i);
    const index_t first = std::clamp(allowed.begin - tile.begin, index_t{0}, keys);
    const index_t last = std::clamp(allowed.end - tile.begin, first, keys);
    std::fill(row, row + first, kExcluded<T>);
    std::fill(row + last, row + keys, kExcluded<T>);
  } else {
    for (index_t c = 0; c < keys; ++c) {
      if (!plan.allows(h, i, tile.begin + c)) row[c] = kExcluded<T>;
    }
  }
}

/// Computes output rows [q_begin, q_end) of query head h in batch b against the packed K/V of
/// its kv head, visiting exactly the key tiles the plan lists.
template <class T, KeyTilePlan Plan>
void process_query_tile(const TiledCall<T>& call, const Plan& plan, const TileShape& tiles,
                        const KeyValuePanels<T>& panels, QueryTileWorkspace<T>& work, index_t b, index_t h,
                        index_t q_begin, index_t q_end) {
  constexpr index_t kW = static_cast<index_t>(simd::kWidth<T>);
  constexpr T kLog2e = T(1.442695040888963407359924681001892137);
  const index_t head_dim = call.shape.head_dim;
  const index_t rows = q_end - q_begin;
  const index_t padded_rows = attnkit::detail::round_up(rows, std::max(simd::kScoreRowBlock, simd::kValueRowBlock));

  // Q rows scaled by sigma * log2(e): scores come out in base 2 (SPEC.md section 1).
  const T q_scale = call.scale * kLog2e;
  T* queries = work.queries;
  for (index_t r = 0; r < rows; ++r) {
    const T* q = call.q.row(b, h, q_begin + r);
    for (index_t d = 0; d < head_dim; ++d) queries[r * head_dim + d] = q[d] * q_scale;
  }
  std::fill(queries + rows * head_dim, queries + padded_rows * head_dim, T(0));
  work.softmax.reset(padded_rows);

  T* scores = work.scores;
  const index_t score_stride = tiles.key_rows;
  plan.for_each_key_tile(h, q_begin, q_end, [&](const KeyTile& tile) {
    const index_t panel = tile.begin / tiles.key_rows;
    const index_t offset = tile.begin - panel * tiles.key_rows;
    const index_t keys = tile.end - tile.begin;
    const index_t columns = attnkit::detail::round_up(keys, kW);
    simd::score_tile(queries, head_dim, panels.key_panel(panel) + offset, tiles.key_rows, padded_rows, keys, scores,
                     score_stride);
    for (index_t r = 0; r < rows; ++r) {
      T* row = scores + r * score_stride;
      if (tile.needs_mask) exclude_masked(plan, h, q_begin + r, tile, row);
      std::fill(row + keys, row + columns, kExcluded<T>);  // vector tail past the last key
    }
    work.softmax.absorb_scores(scores, score_stride, rows, columns);
    const T* values = panels.value_rows(tile.begin);
    if (tile.needs_mask && panels.has_nonfinite_values(panel)) {
      work.softmax.template accumulate<simd::ZeroWeights::kSkip>(scores, score_stride, values, padded_rows, keys,
                                                                 panels.value_vectors());
    } else {
      work.softmax.template accumulate<simd::ZeroWeights::kMultiply>(scores, score_stride, values, padded_rows, keys,
                                                                     panels.value_vectors());
    }
  });

  for (index_t r = 0; r < rows; ++r) {
    const T lse = work.softmax.finish_row(r, call.out.row(b, h, q_begin + r), call.shape.value_dim);
    if (call.lse != nullptr) *call.lse->row(b, h, q_begin + r) = lse;
  }
}

}  // namespace detail

/// Runs a KeyTilePlan over the whole call. One parallel region; for each (batch, kv head):
/// the threads pack its K/V panels (static split over key tiles), then take its
/// (query head of the group, query tile) items dynamically, last query tile first (under
/// causal masks later tiles carry more keys). Every output row is produced by one thread with
/// a fixed operation order, so results do not depend on the thread count.
/// Extra memory: one group's panels, (Lk rounded up) x (D + Dv rounded up) elements, plus per
/// thread O(query_rows x (key_rows + D + Dv)).
template <class T, KeyTilePlan Plan>
void run_tiled(const TiledCall<T>& call, const Plan& plan, const TileShape& tiles) {
  const AttentionShape& shape = call.shape;
  if (shape.batch == 0 || shape.q_heads == 0 || shape.q_len == 0) return;
  KeyValuePanels<T> panels(shape, tiles);
  const index_t group_size = shape.group_size();
  const index_t query_tiles = attnkit::detail::ceil_div(shape.q_len, tiles.query_rows);
  const index_t items_per_group = group_size * query_tiles;

  parallel::parallel_region(call.threads, [&](parallel::Team& team) {
    detail::QueryTileWorkspace<T> work(shape, tiles, panels.value_stride());
    for (index_t group = 0; group < shape.batch * shape.kv_heads; ++group) {
      const index_t b = group / shape.kv_heads;
      const index_t kv_head = group % shape.kv_heads;
      team.for_each_static(panels.tile_count(),
                           [&](index_t tile) { panels.pack_tile(call.k, call.v, b, kv_head, tile); });
      team.for_each_dynamic(items_per_group, [&](index_t item) {
        const index_t reversed = items_per_group - 1 - item;
        const index_t h = kv_head * group_size + reversed / query_tiles;
        const index_t q_begin = (reversed % query_tiles) * tiles.query_rows;
        const index_t q_end = std::min(q_begin + tiles.query_rows, shape.q_len);
        detail::process_query_tile(call, plan, tiles, panels, work, b, h, q_begin, q_end);
      });
    }
  });
}

}  // namespace attnkit::kernel
