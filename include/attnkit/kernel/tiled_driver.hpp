#pragma once
// The tiled online-softmax driver: executes any KeyTilePlan (SPEC.md section 1 algorithm).

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "attnkit/core/call.hpp"
#include "attnkit/core/concepts.hpp"
#include "attnkit/core/detail/score_masking.hpp"
#include "attnkit/core/plan_call.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/core/tensor_view.hpp"
#include "attnkit/detail/thread_scratch.hpp"
#include "attnkit/kernel/key_value_panels.hpp"
#include "attnkit/kernel/query_tile_step.hpp"
#include "attnkit/parallel/team.hpp"
#include "attnkit/simd/batch.hpp"
#include "attnkit/simd/score_tile.hpp"
#include "attnkit/simd/value_accumulate.hpp"

namespace attnkit::kernel {

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
  plan.for_each_key_tile(h, q_begin, q_end, [&](const KeyTile& tile) {
    keys += static_cast<double>(tile.end - tile.begin) + kTileOverheadKeys;
  });
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
    step[static_cast<std::size_t>(item)] =
        static_cast<int>(4 * std::log2(1 + tiles[static_cast<std::size_t>(item)].work));
  }
  std::sort(items.begin(), items.end(), [&](index_t x, index_t y) {
    const int sx = step[static_cast<std::size_t>(x)], sy = step[static_cast<std::size_t>(y)];
    return sx != sy ? sx > sy : x > y;
  });
  return items;
}

}  // namespace detail

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
/// The call's views and the plan must outlive the pass. Half q, k, v widen to T (float) as
/// query tiles and K/V panels are loaded, and half out rows narrow as they are finished.
template <class Call, KeyTilePlan Plan>
class TiledPass {
  using T = typename Call::value_type;

 public:
  TiledPass(const Call& call, const Plan& plan, const TileShape& tiles)
      : call_(call),
        plan_(plan),
        tiles_(tiles),
        query_positions_(attnkit::query_positions(plan, call.shape)),
        // V is read in place when its rows are the keys in order (no reordering plan), whole
        // vectors (nothing to pad) and adjacent in memory. Rows a head stride apart (BLHD:
        // H Dv elements, 2 KiB for H = 8, Dv = 64 in float) made full attention 1.35x slower
        // than packed rows, paired, on a Xeon with AVX-512 (docs/notes/driver-design.md). Half V is
        // always packed (widened).
        panels_(call.shape, tiles, call.v,
                !ReorderingPlan<Plan> && std::is_same_v<typename Call::key_value_type, T> &&
                    call.shape.value_dim % static_cast<index_t>(simd::kWidth<T>) == 0 &&
                    call.v.stride(kSeq) == call.shape.value_dim,
                attnkit::key_positions(plan, call.shape)),
        query_tiles_(attnkit::detail::ceil_div(query_positions_, tiles.query_rows)),
        tile_work_(static_cast<std::size_t>(call.shape.q_heads * query_tiles_)) {}

  void run(parallel::Team& team) {
    const parallel::FlushToZero flush;  // subnormal weights cost assists (parallel/team.hpp)
    const AttentionShape& shape = call_.shape;
    if (shape.batch == 0 || shape.q_heads == 0 || query_positions_ == 0) return;
    QueryTileWorkspace<T> work(shape, tiles_, panels_.value_stride());
    team.for_each_static(shape.q_heads * query_tiles_, [&](index_t item) {
      const KeyRange rows = query_range(item);
      tile_work_[static_cast<std::size_t>(item)] =
          rows.begin == rows.end ? detail::TileWork{0, false}
                                 : detail::tile_work(plan_, item / query_tiles_, rows.begin, rows.end);
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
          if constexpr (SharedQueryKeyPlan<Plan>) {
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
          if (rows.begin == rows.end) return;  // every row before call.first_query
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
  /// Query positions of item (query head, query tile) to compute: none when every row behind
  /// them lies before call.first_query, else the whole tile (its rows before first_query get
  /// zero queries and are not written). Whole tiles, so that each row meets the key tiles,
  /// score-tile segments and softmax blocks of the square call's tile: the same bits. Clipped
  /// to its first computed row, a tile's causal key tiles split at another key and rows
  /// differed in the last bit; the rows computed in vain are at most a tile per head.
  KeyRange query_range(index_t item) const {
    const index_t q_begin = (item % query_tiles_) * tiles_.query_rows;
    const index_t q_end = std::min(q_begin + tiles_.query_rows, query_positions_);
    if (call_.first_query == 0) return KeyRange{q_begin, q_end};
    if constexpr (ReorderingPlan<Plan>) {
      const index_t h = item / query_tiles_;
      for (index_t p = q_begin; p < q_end; ++p)
        if (attnkit::query_row(plan_, h, p) >= call_.first_query) return KeyRange{q_begin, q_end};
      return KeyRange{q_end, q_end};
    } else {
      return q_end > call_.first_query ? KeyRange{q_begin, q_end} : KeyRange{q_end, q_end};
    }
  }

  Call call_;
  const Plan& plan_;
  TileShape tiles_;
  index_t query_positions_;
  CallPanels<Call> panels_;
  index_t query_tiles_;
  std::vector<detail::TileWork> tile_work_;  // per (query head, query tile)
};

/// Runs a KeyTilePlan over the whole call in one parallel region (see TiledPass).
template <class Call, KeyTilePlan Plan>
void run_tiled(const Call& call, const Plan& plan, const TileShape& tiles) {
  TiledPass<Call, Plan> pass(call, plan, tiles);
  parallel::parallel_region(call.threads, [&](parallel::Team& team) { pass.run(team); });
}

}  // namespace attnkit::kernel
