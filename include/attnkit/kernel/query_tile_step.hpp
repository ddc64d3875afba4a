#pragma once
// The tiled driver's per-query-tile step (SPEC.md section 1 algorithm), in three named steps:
// load queries, scores with mask and bias (and the softmax update and P V they feed), finish
// rows. kernel/tiled_driver.hpp runs it over a whole call; executors with panels of their own
// run it on those (kernel/lsh_plan.hpp).

#include <algorithm>
#include <cstddef>
#include <type_traits>
#include <vector>

#include "attnkit/core/call.hpp"
#include "attnkit/core/concepts.hpp"
#include "attnkit/core/detail/score_masking.hpp"
#include "attnkit/core/plan_call.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/detail/thread_scratch.hpp"
#include "attnkit/kernel/key_value_panels.hpp"
#include "attnkit/kernel/online_softmax.hpp"
#include "attnkit/simd/batch.hpp"
#include "attnkit/simd/convert.hpp"
#include "attnkit/simd/score_modifiers.hpp"
#include "attnkit/simd/score_tile.hpp"
#include "attnkit/simd/value_accumulate.hpp"

namespace attnkit::kernel {

/// log2(e): queries scaled by sigma log2(e) give base-2 scores; natural-log biases times it.
template <class T>
inline constexpr T kLog2e = T(1.442695040888963407359924681001892137);

/// Whether a plan's score bias applies to this key tile: a BiasedPlan's bias_scope() (every
/// tile for a position bias such as ALiBi; by default only tiles that need a mask, where
/// LSH's self penalty sits); never for other plans, nor for an OptionallyBiasedPlan without one.
template <KeyTilePlan Plan>
bool biases_tile(const Plan& plan, const KeyTile& tile) {
  if constexpr (BiasedPlan<Plan>) {
    if constexpr (OptionallyBiasedPlan<Plan>) {
      if (!plan.has_bias()) return false;
    }
    return tile.needs_mask || bias_scope(plan) == BiasScope::kEveryTile;
  } else {
    return false;
  }
}

/// The soft-capping cap in the kernels' base-2 score units.
template <class T>
T softcap_in_base_2(const ScoreModifiers& modifiers) {
  return static_cast<T>(modifiers.softcap * kLog2e<double>);
}

/// Query head h's ALiBi slope in the kernels' base-2 score units.
template <class T>
T alibi_slope_in_base_2(const ScoreModifiers& modifiers, index_t h) {
  return static_cast<T>(modifiers.slopes[static_cast<std::size_t>(h)] * kLog2e<double>);
}

/// Applies score modifiers (SPEC.md section 14) to n base-2 scores of consecutive keys
/// first_key .. first_key + n - 1 for a query of head h at `position`: soft-capping first, then
/// ALiBi's distance penalty. Used by decode (the tiled driver applies both in its score tile's
/// epilogue: score_segments).
template <class T>
void modify_score_run(const ScoreModifiers& modifiers, T* row, index_t n, index_t h, index_t position,
                      index_t first_key) {
  if (modifiers.softcap > 0) simd::soft_cap(row, n, softcap_in_base_2<T>(modifiers));
  if (modifiers.slopes.empty()) return;
  const T slope = alibi_slope_in_base_2<T>(modifiers, h);
  simd::subtract_distance(row, n, slope, position - first_key);
}

/// ALiBi's distance penalty on one row of a key tile's base-2 scores where a ReorderingPlan's
/// keys are not consecutive rows (Dilated's residue classes): `row` holds keys at plan
/// positions [tile.begin, tile.end) for query row `query_row` of head h, at position
/// query_row + Lk - Lq; each key's row comes from the plan. Other plans take the penalty in the
/// score tile's epilogue (simd::DistancePenalty, score_segments). Soft-capping came first.
template <class Call, ReorderingPlan Plan, class T = typename Call::value_type>
void subtract_alibi(const Call& call, const Plan& plan, index_t h, index_t query_row, const KeyTile& tile, T* row) {
  const index_t keys = tile.end - tile.begin;
  const index_t position = query_row + call.shape.kv_len - call.shape.q_len;
  const T slope = alibi_slope_in_base_2<T>(call.modifiers, h);
  for (index_t c = 0; c < keys; ++c) {
    const index_t key = attnkit::key_row(plan, h, tile.begin + c);
    row[c] -= slope * static_cast<T>(position > key ? position - key : key - position);
  }
}

/// The K/V panels of a call type: computed in its value_type from its key_value_type.
template <class Call>
using CallPanels = KeyValuePanels<typename Call::value_type, typename Call::key_value_type>;

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
    alibi_offsets.resize(static_cast<std::size_t>(tiles.query_rows));
    result.resize(static_cast<std::size_t>(shape.value_dim));
  }
  T* queries;  // [query_rows x head_dim], rows past the tile zero
  T* scores;   // [query_rows x key_rows], scores then weights
  OnlineSoftmax<T> softmax;
  std::vector<KeySegment> segments;  // the key tiles sharing the current score tile
  std::vector<index_t> query_rows;   // the query row behind each position of the tile
  std::vector<T> alibi_offsets;      // per padded row: its position minus the segment's first key
  std::vector<T> result;             // one finished row for an OccurrencePlan's sink or to narrow
};

/// Step 1 of a query tile, load queries: the rows at query positions [q_begin, q_end) of
/// query head h (batch b), in the plan's query order, widened to T and scaled by sigma * log2(e) so that scores
/// come out in base 2 (SPEC.md section 1; divided by the cap as well under soft-capping,
/// which simd::SoftCap takes), into work.queries; rows up to the padded row count
/// zero. A SharedQueryKeyPlan's queries are keys of this tile's own windows: they are read
/// back from the panels, which the scores read next, instead of gathered from Q. Resets the
/// softmax state; returns the padded row count (a multiple of the micro-kernels' row blocks).
template <class Call, KeyTilePlan Plan, class T = typename Call::value_type>
index_t load_queries(const Call& call, const Plan& plan, const CallPanels<Call>& panels, QueryTileWorkspace<T>& work,
                     index_t b, index_t h, index_t q_begin, index_t q_end) {
  const index_t head_dim = call.shape.head_dim;
  const index_t rows = q_end - q_begin;
  const index_t padded_rows = attnkit::detail::round_up(rows, std::max(simd::kScoreRowBlock, simd::kValueRowBlock));
  // Soft-capping takes its score divided by the cap (simd::SoftCap): one factor more here.
  const T softcap_factor =
      call.modifiers.softcap > 0 ? simd::SoftCap<T>::divisor_factor(softcap_in_base_2<T>(call.modifiers)) : T(1);
  const T q_scale = call.scale * kLog2e<T> * softcap_factor;
  T* queries = work.queries;
  for (index_t r = 0; r < rows; ++r)
    work.query_rows[static_cast<std::size_t>(r)] = attnkit::query_row(plan, h, q_begin + r);
  if constexpr (SharedQueryKeyPlan<Plan>) {
    panels.unpack_keys(plan.query_key_offset(h) + q_begin, rows, queries);
    for (index_t r = 0; r < rows; ++r) {
      const T scale = static_cast<T>(plan.query_scale(h, q_begin + r)) * q_scale;
      for (index_t d = 0; d < head_dim; ++d) queries[r * head_dim + d] *= scale;
    }
  } else {
    for (index_t r = 0; r < rows; ++r) {
      const index_t query_row = work.query_rows[static_cast<std::size_t>(r)];
      T* row = queries + r * head_dim;
      if (query_row < call.first_query) {  // not computed (AttentionCall::first_query)
        std::fill(row, row + head_dim, T(0));
        continue;
      }
      const auto* q = call.q.row(b, h, query_row - call.first_query);
      if constexpr (std::is_same_v<typename Call::input_type, T>) {
        for (index_t d = 0; d < head_dim; ++d) row[d] = q[d] * q_scale;
      } else {
        simd::widen_row(q, head_dim, row);
        for (index_t d = 0; d < head_dim; ++d) row[d] *= q_scale;
      }
    }
  }
  std::fill(queries + rows * head_dim, queries + padded_rows * head_dim, T(0));
  work.softmax.reset(padded_rows);
  return padded_rows;
}

/// Step 2, scores with mask and bias, for the key tiles gathered in work.segments (one score
/// tile of `columns` columns): S = Q K^T per segment, soft-capped and ALiBi's penalty
/// subtracted on its way out of the registers (on every score: excluded ones are overwritten
/// next; a ReorderingPlan's penalty comes after, per row: subtract_alibi), then for each row
/// the plan's exclusion on tiles that need a mask and its score bias (BiasedPlan) on the tiles the bias policy
/// names (its bias_scope: masked tiles, or every tile), -inf in each segment's padding
/// columns; then the online softmax absorbs the tile and accumulates P V. Clears the segments.
template <class Call, KeyTilePlan Plan, class T = typename Call::value_type>
void score_segments(const Call& call, const Plan& plan, const TileShape& tiles, const CallPanels<Call>& panels,
                    QueryTileWorkspace<T>& work, index_t b, index_t h, index_t q_begin, index_t rows,
                    index_t padded_rows, index_t columns) {
  constexpr index_t kW = static_cast<index_t>(simd::kWidth<T>);
  const index_t head_dim = call.shape.head_dim;
  const index_t kv_head = h / call.shape.group_size();
  T* scores = work.scores;
  const index_t score_stride = tiles.key_rows;
  std::vector<KeySegment>& segments = work.segments;
  for (const KeySegment& segment : segments) {
    const KeyTile& tile = segment.tile;
    const index_t panel = tile.begin / tiles.key_rows;
    const index_t keys = tile.end - tile.begin;
    const T* keys_t = panels.key_panel(panel) + (tile.begin - panel * tiles.key_rows);
    const bool alibi = !call.modifiers.slopes.empty();
    const auto score_with = [&](const auto& epilogue) {
      simd::score_tile(work.queries, head_dim, keys_t, tiles.key_rows, padded_rows, keys, scores + segment.column,
                       score_stride, epilogue);
    };
    const auto penalised = [&]<class Inner>(const Inner& inner) {
      if constexpr (!ReorderingPlan<Plan>) {
        if (alibi) {
          // Consecutive keys from tile.begin: the penalty in the epilogue as well.
          const index_t diagonal_row = tile.begin + call.shape.q_len - call.shape.kv_len;  // at tile.begin
          for (index_t r = 0; r < padded_rows; ++r) {
            const index_t query_row = r < rows ? work.query_rows[static_cast<std::size_t>(r)] : diagonal_row;
            work.alibi_offsets[static_cast<std::size_t>(r)] = static_cast<T>(query_row - diagonal_row);
          }
          score_with(simd::DistancePenalty<T, Inner>(inner, work.alibi_offsets.data(),
                                                     alibi_slope_in_base_2<T>(call.modifiers, h)));
          return;
        }
      }
      score_with(inner);
    };
    if (call.modifiers.softcap > 0) {
      penalised(simd::SoftCap<T>(softcap_in_base_2<T>(call.modifiers)));
    } else {
      penalised(simd::PlainScores{});
    }
    const bool biased = biases_tile(plan, tile);
    for (index_t r = 0; r < rows; ++r) {
      T* row = scores + r * score_stride + segment.column;
      if constexpr (ReorderingPlan<Plan>) {
        if (alibi) subtract_alibi(call, plan, h, work.query_rows[static_cast<std::size_t>(r)], tile, row);
      }
      if (tile.needs_mask) plan.exclude(h, q_begin + r, tile, row);
      if constexpr (BiasedPlan<Plan>) {
        if (biased) plan.add_bias(h, q_begin + r, tile, row, kLog2e<T>);
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
      work.softmax.template accumulate<simd::ZeroWeights::kMultiply>(weights, score_stride, values, padded_rows, keys,
                                                                     panels.value_vectors(), s == 0);
    }
  }
  segments.clear();
}

/// Step 3, finish rows: out = O~ / l and lse = ln 2 (m + log2 l) into each row's place (its
/// query row; narrowed to the output type of a half call), or handed to an OccurrencePlan's
/// sink; empty rows get 0 and -inf.
template <class Call, KeyTilePlan Plan, class T = typename Call::value_type>
void finish_rows(const Call& call, const Plan& plan, QueryTileWorkspace<T>& work, index_t b, index_t h, index_t q_begin,
                 index_t rows) {
  using Output = typename Call::output_type;
  if constexpr (OccurrencePlan<Plan>) {
    static_assert(std::is_same_v<typename Plan::value_type, T>, "an OccurrencePlan sinks rows of the call's type");
  }
  const index_t value_dim = call.shape.value_dim;
  for (index_t r = 0; r < rows; ++r) {
    if constexpr (OccurrencePlan<Plan>) {
      T* result = work.result.data();
      const T lse = work.softmax.finish_row(r, result, value_dim);
      plan.sink(b, h, q_begin + r, static_cast<const T*>(result), lse);
    } else {
      const index_t query_row = work.query_rows[static_cast<std::size_t>(r)];
      if (query_row < call.first_query) continue;  // not computed (AttentionCall::first_query)
      const index_t i = query_row - call.first_query;
      T lse;
      if constexpr (std::is_same_v<Output, T>) {
        lse = work.softmax.finish_row(r, call.out.row(b, h, i), value_dim);
      } else {
        lse = work.softmax.finish_row(r, work.result.data(), value_dim);
        simd::narrow_row(work.result.data(), value_dim, call.out.row(b, h, i));
      }
      if (call.lse != nullptr) *call.lse->row(b, h, i) = lse;
    }
  }
}

/// The driver's step: computes the output rows at query positions [q_begin, q_end) of query
/// head h in batch b against the packed K/V of its kv head, visiting exactly the key tiles the
/// plan lists: load queries, then scores with mask and bias for each score tile's worth of key
/// tiles, then finish rows. Each KeyTile lies inside one aligned panel, so its K^T columns are
/// contiguous. Key tiles are gathered into segments of one score tile until its key_rows
/// columns are full (each segment starting on a vector boundary), so short tiles (BigBird's
/// and block layouts' 64-key blocks) share one softmax update instead of paying one each.
/// TiledPass runs it over the panels of a whole (batch, kv head); an executor with panels of
/// its own may run it too (LSH: one chunk's window at a time, kernel/lsh_plan.hpp).
template <class Call, KeyTilePlan Plan, class T = typename Call::value_type>
void process_query_tile(const Call& call, const Plan& plan, const TileShape& tiles, const CallPanels<Call>& panels,
                        QueryTileWorkspace<T>& work, index_t b, index_t h, index_t q_begin, index_t q_end) {
  constexpr index_t kW = static_cast<index_t>(simd::kWidth<T>);
  const index_t rows = q_end - q_begin;
  const index_t padded_rows = load_queries(call, plan, panels, work, b, h, q_begin, q_end);
  index_t columns = 0;
  plan.for_each_key_tile(h, q_begin, q_end, [&](const KeyTile& tile) {
    const index_t width = attnkit::detail::round_up(tile.end - tile.begin, kW);
    if (columns + width > tiles.key_rows && !work.segments.empty()) {
      score_segments(call, plan, tiles, panels, work, b, h, q_begin, rows, padded_rows, columns);
      columns = 0;
    }
    work.segments.push_back(KeySegment{tile, columns});
    columns += width;
  });
  if (!work.segments.empty())
    score_segments(call, plan, tiles, panels, work, b, h, q_begin, rows, padded_rows, columns);
  finish_rows(call, plan, work, b, h, q_begin, rows);
}

}  // namespace attnkit::kernel
