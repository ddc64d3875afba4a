#pragma once
// The tiled online-softmax driver: executes any KeyTilePlan (SPEC.md section 1 algorithm).

#include <algorithm>
#include <cmath>
#include <vector>

#include "attnkit/core/call.hpp"
#include "attnkit/core/concepts.hpp"
#include "attnkit/core/plan_call.hpp"
#include "attnkit/core/score_masking.hpp"
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
/// and measured full attention is as fast as with 64 rows (16 rows: 4% slower). 256 keys per
/// tile amortise the per-row softmax bookkeeping (max, rescale) over more FMAs: with 128, a
/// radius-256 window ran 7% slower per pair (more, shorter tiles per query tile) and full
/// attention no faster; the 32 x 256 score tile (32 KiB in fp32) still fits L1.
template <class T>
constexpr TileShape default_tile_shape() {
  return TileShape{32, 256};
}

namespace detail {

/// The query heads of kv head `kv_head` grouped by key order: heads[begin[o] .. begin[o + 1])
/// share the o-th distinct order (in order of first appearance). One group for plans that do
/// not reorder.
struct HeadsByKeyOrder {
  std::vector<index_t> heads;
  std::vector<index_t> begin;
};
template <KeyTilePlan Plan>
HeadsByKeyOrder heads_by_key_order(const Plan& plan, index_t kv_head, index_t group_size) {
  HeadsByKeyOrder grouped;
  std::vector<bool> taken(static_cast<std::size_t>(group_size), false);
  for (index_t first = 0; first < group_size; ++first) {
    if (taken[static_cast<std::size_t>(first)]) continue;
    grouped.begin.push_back(static_cast<index_t>(grouped.heads.size()));
    const index_t order = attnkit::key_order(plan, kv_head * group_size + first);
    for (index_t g = first; g < group_size; ++g) {
      if (!taken[static_cast<std::size_t>(g)] && attnkit::key_order(plan, kv_head * group_size + g) == order) {
        taken[static_cast<std::size_t>(g)] = true;
        grouped.heads.push_back(kv_head * group_size + g);
      }
    }
  }
  grouped.begin.push_back(static_cast<index_t>(grouped.heads.size()));
  return grouped;
}

/// Relative work of the query positions [q_begin, q_end) of head h computed as one query
/// tile: its rows padded to the micro-kernels' row blocks, times the keys of its key tiles
/// plus a fixed overhead per tile (softmax bookkeeping of a short tile).
template <KeyTilePlan Plan>
double estimated_work(const Plan& plan, index_t h, index_t q_begin, index_t q_end) {
  constexpr double kTileOverheadKeys = 16;
  double keys = 0;
  plan.for_each_key_tile(h, q_begin, q_end,
                         [&](const KeyTile& tile) { keys += static_cast<double>(tile.end - tile.begin) + kTileOverheadKeys; });
  const index_t rows = attnkit::detail::round_up(q_end - q_begin, std::max(simd::kScoreRowBlock, simd::kValueRowBlock));
  return static_cast<double>(rows) * keys;
}

/// How the driver computes one query tile: whole, or as the runs of a RowSplittingPlan when
/// their estimated work is smaller (a global row alone: 4 padded rows over every key instead
/// of the tile's 32), and the estimate of the way chosen.
struct TileWork {
  double work;
  bool by_runs;
};
/// The whole tile is estimated a second time only when the plan cuts it into several runs.
template <KeyTilePlan Plan>
TileWork tile_work(const Plan& plan, index_t h, index_t q_begin, index_t q_end) {
  double by_runs = 0;
  int runs = 0;
  attnkit::for_each_row_run(plan, h, q_begin, q_end, [&](const KeyRange& run) {
    by_runs += estimated_work(plan, h, run.begin, run.end);
    ++runs;
  });
  if (runs == 1) return TileWork{by_runs, false};  // the run is the tile
  const double whole = estimated_work(plan, h, q_begin, q_end);
  return by_runs < whole ? TileWork{by_runs, true} : TileWork{whole, false};
}

/// The items (heads[s] * query_tiles + t) of heads[0 .. head_count), heaviest first by
/// `tiles[item].work` in steps of a quarter octave, and within a step in
/// decreasing item order: the heavy tiles (a global row's, a causal tile near the end) start
/// early instead of keeping the team at the barrier, while tiles of similar work stay next
/// to their neighbours (see Team::for_each_dynamic).
inline std::vector<index_t> heaviest_first(const index_t* heads, index_t head_count, index_t query_tiles,
                                           const std::vector<TileWork>& tiles) {
  std::vector<index_t> items;
  items.reserve(static_cast<std::size_t>(head_count * query_tiles));
  for (index_t s = 0; s < head_count; ++s)
    for (index_t t = 0; t < query_tiles; ++t) items.push_back(heads[s] * query_tiles + t);
  std::vector<int> step(tiles.size());
  for (index_t item : items) {
    step[static_cast<std::size_t>(item)] = static_cast<int>(4 * std::log2(1 + tiles[static_cast<std::size_t>(item)].work));
  }
  std::sort(items.begin(), items.end(), [&](index_t x, index_t y) {
    const int sx = step[static_cast<std::size_t>(x)], sy = step[static_cast<std::size_t>(y)];
    return sx != sy ? sx > sy : x > y;
  });
  return items;
}

}  // namespace detail

/// A key tile placed at `column` of the score tile.
struct KeySegment {
  KeyTile tile;
  index_t column;
};

/// Per-thread scratch of one query tile: scaled Q rows, the score tile and the softmax state
/// (detail::thread_scratch, reused across calls).
template <class T>
struct QueryTileWorkspace {
  QueryTileWorkspace(const AttentionShape& shape, const TileShape& tiles, index_t value_stride)
      : queries(attnkit::detail::thread_scratch<struct QueryTileTag, T>(tiles.query_rows * shape.head_dim)),
        scores(attnkit::detail::thread_scratch<struct ScoreTileTag, T>(tiles.query_rows * tiles.key_rows)),
        softmax(tiles.query_rows, value_stride) {
    segments.reserve(static_cast<std::size_t>(tiles.key_rows));
    query_rows.resize(static_cast<std::size_t>(tiles.query_rows));
    result.resize(static_cast<std::size_t>(shape.value_dim));
  }
  T* queries;  // [query_rows x head_dim], rows past the tile zero
  T* scores;   // [query_rows x key_rows], scores then weights
  OnlineSoftmax<T> softmax;
  std::vector<KeySegment> segments;  // the key tiles sharing the current score tile
  std::vector<index_t> query_rows;    // the query row behind each position of the tile
  std::vector<T> result;              // one finished row handed to a SinkingPlan
};

/// The driver's step: computes the output rows at query positions [q_begin, q_end) of query
/// head h in batch b against the packed K/V of its kv head, visiting exactly the key tiles the
/// plan lists. Each KeyTile lies inside one aligned panel, so its K^T columns are contiguous.
/// TiledPass runs it over the panels of a whole (batch, kv head); an executor with panels of
/// its own may run it too (LSH: one chunk's window at a time, kernel/lsh_plan.hpp).
template <class T, KeyTilePlan Plan>
void process_query_tile(const AttentionCall<T>& call, const Plan& plan, const TileShape& tiles,
                        const KeyValuePanels<T>& panels, QueryTileWorkspace<T>& work, index_t b, index_t h,
                        index_t q_begin, index_t q_end) {
  constexpr index_t kW = static_cast<index_t>(simd::kWidth<T>);
  constexpr T kLog2e = T(1.442695040888963407359924681001892137);
  const index_t head_dim = call.shape.head_dim;
  const index_t kv_head = h / call.shape.group_size();
  const index_t rows = q_end - q_begin;
  const index_t padded_rows = attnkit::detail::round_up(rows, std::max(simd::kScoreRowBlock, simd::kValueRowBlock));

  // Q rows scaled by sigma * log2(e): scores come out in base 2 (SPEC.md section 1).
  const T q_scale = call.scale * kLog2e;
  T* queries = work.queries;
  for (index_t r = 0; r < rows; ++r) work.query_rows[static_cast<std::size_t>(r)] = attnkit::query_row(plan, h, q_begin + r);
  if constexpr (SharedQueryKeyPlan<Plan>) {
    // The queries are keys of this tile's own windows: read them back from the panels, which
    // the scores read next, instead of gathering rows from Q.
    panels.unpack_keys(plan.query_key_offset(h) + q_begin, rows, queries);
    for (index_t r = 0; r < rows; ++r) {
      const T scale = static_cast<T>(plan.query_scale(h, q_begin + r)) * q_scale;
      for (index_t d = 0; d < head_dim; ++d) queries[r * head_dim + d] *= scale;
    }
  } else {
    for (index_t r = 0; r < rows; ++r) {
      const T* q = call.q.row(b, h, work.query_rows[static_cast<std::size_t>(r)]);
      for (index_t d = 0; d < head_dim; ++d) queries[r * head_dim + d] = q[d] * q_scale;
    }
  }
  std::fill(queries + rows * head_dim, queries + padded_rows * head_dim, T(0));
  work.softmax.reset(padded_rows);

  T* scores = work.scores;
  const index_t score_stride = tiles.key_rows;
  // Key tiles are gathered into segments of one score tile until its key_rows columns are
  // full (each segment starting on a vector boundary), so short tiles (BigBird's and block
  // layouts' 64-key blocks) share one softmax update instead of paying one each.
  std::vector<KeySegment>& segments = work.segments;
  index_t columns = 0;
  const auto run_segments = [&] {
    if (segments.empty()) return;
    for (const KeySegment& segment : segments) {
      const KeyTile& tile = segment.tile;
      const index_t panel = tile.begin / tiles.key_rows;
      const index_t keys = tile.end - tile.begin;
      simd::score_tile(queries, head_dim, panels.key_panel(panel) + (tile.begin - panel * tiles.key_rows),
                       tiles.key_rows, padded_rows, keys, scores + segment.column, score_stride);
      for (index_t r = 0; r < rows; ++r) {
        T* row = scores + r * score_stride + segment.column;
        if (tile.needs_mask) {
          plan.exclude(h, q_begin + r, tile, row);
          if constexpr (BiasedPlan<Plan>) plan.add_bias(h, q_begin + r, tile, row, kLog2e);
        }
        std::fill(row + keys, row + attnkit::detail::round_up(keys, kW), attnkit::detail::kExcludedScore<T>);
      }
    }
    work.softmax.absorb_scores(scores, score_stride, rows, columns);
    for (std::size_t s = 0; s < segments.size(); ++s) {
      const KeyTile& tile = segments[s].tile;
      const T* weights = scores + segments[s].column;
      const ValueRows<T> values = panels.value_rows(b, kv_head, tile.begin);
      const index_t keys = tile.end - tile.begin;
      if (tile.needs_mask && panels.has_nonfinite_values(b, kv_head, tile.begin / tiles.key_rows)) {
        work.softmax.template accumulate<simd::ZeroWeights::kSkip>(weights, score_stride, values, padded_rows, keys,
                                                                   panels.value_vectors(), s == 0);
      } else {
        work.softmax.template accumulate<simd::ZeroWeights::kMultiply>(weights, score_stride, values, padded_rows,
                                                                       keys, panels.value_vectors(), s == 0);
      }
    }
    segments.clear();
    columns = 0;
  };
  plan.for_each_key_tile(h, q_begin, q_end, [&](const KeyTile& tile) {
    const index_t width = attnkit::detail::round_up(tile.end - tile.begin, kW);
    if (columns + width > tiles.key_rows) run_segments();
    segments.push_back(KeySegment{tile, columns});
    columns += width;
  });
  run_segments();

  for (index_t r = 0; r < rows; ++r) {
    if constexpr (SinkingPlan<Plan, T>) {
      T* result = work.result.data();
      const T lse = work.softmax.finish_row(r, result, call.shape.value_dim);
      plan.sink(b, h, q_begin + r, static_cast<const T*>(result), lse);
    } else {
      const index_t i = work.query_rows[static_cast<std::size_t>(r)];
      const T lse = work.softmax.finish_row(r, call.out.row(b, h, i), call.shape.value_dim);
      if (call.lse != nullptr) *call.lse->row(b, h, i) = lse;
    }
  }
}

/// One pass of the tiled driver over a call: a KeyTilePlan executed by a thread team.
/// Construct it on one thread (it takes the K/V panels from that thread's scratch, so two
/// passes alive at once must be built on different threads), then every member of the team
/// calls run(team): first the threads estimate the work of
/// every (query head, query tile) from the plan, whole or by the plan's row runs
/// (RowSplittingPlan), whichever is less (static split); then for each
/// (batch, kv head) and each distinct key order of its query heads (one unless the plan
/// reorders rows) they pack its K/V panels in that order (static split over key tiles) and
/// take its (query head, query tile) items dynamically, heaviest first. Every output row is
/// produced by one thread with a fixed operation order, so results do not depend on the
/// thread count. Executable plans run a pass on derived inputs inside their own region
/// (Linformer: after the team has projected K and V).
/// Extra memory: one group's panels, (Lk rounded up) x (D + Dv rounded up) elements, plus per
/// thread O(query_rows x (key_rows + D + Dv)), plus one TileWork per (query head, query tile).
/// The call's views and the plan must outlive the pass.
template <class T, KeyTilePlan Plan>
class TiledPass {
 public:
  TiledPass(const AttentionCall<T>& call, const Plan& plan, const TileShape& tiles)
      : call_(call),
        plan_(plan),
        tiles_(tiles),
        query_positions_(attnkit::query_positions(plan, call.shape)),
        // V is read in place when its rows are the keys in order (no reordering plan), whole
        // vectors (nothing to pad) and adjacent in memory. Rows a head stride apart (BLHD:
        // H Dv elements, 2 KiB for H = 8, Dv = 64 in float) made full attention 1.35x slower
        // than packed rows, paired, on a Xeon with AVX-512 (docs/architecture.md).
        panels_(call.shape, tiles, call.v,
                !ReorderingPlan<Plan> && call.shape.value_dim % static_cast<index_t>(simd::kWidth<T>) == 0 &&
                    call.v.stride(kSeq) == call.shape.value_dim,
                attnkit::key_positions(plan, call.shape)),
        query_tiles_(attnkit::detail::ceil_div(query_positions_, tiles.query_rows)),
        tile_work_(static_cast<std::size_t>(call.shape.q_heads * query_tiles_)) {}

  void run(parallel::Team& team) {
    const AttentionShape& shape = call_.shape;
    if (shape.batch == 0 || shape.q_heads == 0 || query_positions_ == 0) return;
    QueryTileWorkspace<T> work(shape, tiles_, panels_.value_stride());
    team.for_each_static(shape.q_heads * query_tiles_, [&](index_t item) {
      const KeyRange rows = query_range(item);
      tile_work_[static_cast<std::size_t>(item)] = detail::tile_work(plan_, item / query_tiles_, rows.begin, rows.end);
    });
    for (index_t group = 0; group < shape.batch * shape.kv_heads; ++group) {
      const index_t b = group / shape.kv_heads;
      const index_t kv_head = group % shape.kv_heads;
      const detail::HeadsByKeyOrder grouped = detail::heads_by_key_order(plan_, kv_head, shape.group_size());
      for (std::size_t order = 0; order + 1 < grouped.begin.size(); ++order) {
        const index_t* heads = grouped.heads.data() + grouped.begin[order];
        const index_t head_count = grouped.begin[order + 1] - grouped.begin[order];
        team.for_each_static(panels_.tile_count(), [&](index_t tile) {
          const auto key_row = [&](index_t position) { return attnkit::key_row(plan_, heads[0], position); };
          if constexpr (ScaledKeyPlan<Plan>) {
            panels_.pack_tile(call_.k, b, kv_head, tile, key_row,
                              [&](index_t position) { return plan_.key_scale(heads[0], position); });
          } else {
            panels_.pack_tile(call_.k, b, kv_head, tile, key_row, simd::Unscaled{});
          }
        });
        const std::vector<index_t> items = detail::heaviest_first(heads, head_count, query_tiles_, tile_work_);
        team.for_each_dynamic(static_cast<index_t>(items.size()), [&](index_t e) {
          const index_t item = items[static_cast<std::size_t>(e)], h = item / query_tiles_;
          const KeyRange rows = query_range(item);
          const auto process = [&](const KeyRange& run) {
            process_query_tile(call_, plan_, tiles_, panels_, work, b, h, run.begin, run.end);
          };
          if (tile_work_[static_cast<std::size_t>(item)].by_runs) {
            attnkit::for_each_row_run(plan_, h, rows.begin, rows.end, process);
          } else {
            process(rows);
          }
        });
      }
    }
  }

 private:
  /// Query positions of item (query head, query tile).
  KeyRange query_range(index_t item) const {
    const index_t q_begin = (item % query_tiles_) * tiles_.query_rows;
    return KeyRange{q_begin, std::min(q_begin + tiles_.query_rows, query_positions_)};
  }

  AttentionCall<T> call_;
  const Plan& plan_;
  TileShape tiles_;
  index_t query_positions_;
  KeyValuePanels<T> panels_;
  index_t query_tiles_;
  std::vector<detail::TileWork> tile_work_;  // per (query head, query tile)
};

/// Runs a KeyTilePlan over the whole call in one parallel region (see TiledPass).
template <class T, KeyTilePlan Plan>
void run_tiled(const AttentionCall<T>& call, const Plan& plan, const TileShape& tiles) {
  TiledPass<T, Plan> pass(call, plan, tiles);
  parallel::parallel_region(call.threads, [&](parallel::Team& team) { pass.run(team); });
}

}  // namespace attnkit::kernel
