#pragma once
// One work item of a decode call: every query row of one kv head's group against one chunk of
// its sequence's keys, each key read once (SPEC.md section 13). The result is a partial row
// per query row (its softmax over the chunk's attended keys, and that softmax's lse), merged
// with the other chunks' by kernel/decode_driver.hpp.

#include <algorithm>
#include <array>
#include <limits>
#include <type_traits>
#include <vector>

#include "attnkit/core/detail/score_masking.hpp"
#include "attnkit/core/index.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/detail/thread_scratch.hpp"
#include "attnkit/kernel/decode_call.hpp"
#include "attnkit/kernel/key_value_panels.hpp"
#include "attnkit/kernel/online_softmax.hpp"
#include "attnkit/kernel/query_tile_step.hpp"
#include "attnkit/simd/batch.hpp"
#include "attnkit/simd/convert.hpp"
#include "attnkit/simd/key_dots.hpp"
#include "attnkit/simd/prefetch.hpp"
#include "attnkit/simd/value_accumulate.hpp"
#include "attnkit/simd/widening_load.hpp"

namespace attnkit::kernel {

/// Keys per softmax block inside a chunk: scores of every row for these keys, one online
/// softmax update, then P V. 64 keys of a D = 128 float cache are 32 KiB of K, read from
/// memory once, and of V, widened into L1 (or read in place for float).
inline constexpr index_t kDecodeBlockKeys = 64;

/// Keys scored between two rounds of the first block's prefetches of its own V rows.
inline constexpr index_t kPrefetchKeys = 8;

/// How one query row meets a block of keys.
enum class BlockCoverage { kNone, kPartial, kFull };

/// Per-thread scratch of a work item (detail::thread_scratch, reused across calls).
struct DecodeWorkspace {
  DecodeWorkspace(index_t padded_rows, index_t value_stride)
      : scores(attnkit::detail::thread_scratch<struct DecodeScoresTag, float>(padded_rows * kDecodeBlockKeys)),
        values(attnkit::detail::thread_scratch<struct DecodeValuesTag, float>(kDecodeBlockKeys * value_stride)),
        softmax(padded_rows, value_stride) {}
  float* scores;  // [padded rows x kDecodeBlockKeys] scores, then weights; padded rows 0
  float* values;  // [kDecodeBlockKeys x value_stride] V rows widened to float, zero past Dv
  OnlineSoftmax<float> softmax;
};

/// The partial results of the group rows of kv head g in sequence b over the keys of `chunk`:
/// out_rows [group rows x Dv] and out_lse [group rows] (natural log; -inf and zeros for a row
/// attending none of the chunk's keys). Row r is query head g * group + r / Lq, row r % Lq.
/// Keys are visited in blocks of kDecodeBlockKeys cut at page ends; a block no row attends is
/// not read, a key no row attends is not read, and keys a row does not attend are excluded by
/// selection (SPEC.md section 0), never multiplied.
template <class E>
[[gnu::noinline]] void decode_chunk(const DecodeCall<E>& call, const DecodeSpans& spans, index_t b, index_t g,
                                    const KeyRange& chunk, float* out_rows, float* out_lse) {
  constexpr index_t kW = static_cast<index_t>(simd::kWidth<float>);
  constexpr index_t kStride = kDecodeBlockKeys;
  constexpr float kExcluded = attnkit::detail::kExcludedScore<float>;
  const DecodeGeometry& geometry = call.geometry;
  const index_t rows = geometry.group_rows(), group = geometry.group(), q_len = geometry.q_len;
  const index_t padded_rows = attnkit::detail::round_up(rows, simd::kValueRowBlock);
  const index_t head_dim = geometry.head_dim, value_dim = geometry.value_dim;
  const index_t value_stride = attnkit::detail::round_up(value_dim, kW);
  DecodeWorkspace work(padded_rows, value_stride);

  // The group's query rows are consecutive rows of the call's widened queries.
  const float* queries = call.queries + geometry.row_id(b, g * group, 0) * call.query_stride;
  std::vector<std::span<const KeyRange>> row_spans(static_cast<std::size_t>(rows));
  std::vector<std::size_t> cursor(static_cast<std::size_t>(rows));
  for (index_t r = 0; r < rows; ++r) {
    const std::span<const KeyRange> own = spans.row(geometry.row_id(b, g * group + r / q_len, r % q_len));
    row_spans[static_cast<std::size_t>(r)] = own;
    cursor[static_cast<std::size_t>(r)] = static_cast<std::size_t>(
        std::partition_point(own.begin(), own.end(), [&](const KeyRange& s) { return s.end <= chunk.begin; }) -
        own.begin());
  }
  std::fill(work.scores + rows * kStride, work.scores + padded_rows * kStride, 0.0f);
  work.softmax.reset(padded_rows);

  std::vector<BlockCoverage> coverage(static_cast<std::size_t>(rows));
  std::array<bool, kDecodeBlockKeys> needed{};
  bool first_block = true;
  const index_t key_stride = call.cache.key_stride(), cache_value_stride = call.cache.value_stride();
  const index_t key_elements = head_dim / kValuesPerElement<E>, value_elements = value_dim / kValuesPerElement<E>;
  for (index_t j0 = chunk.begin, j1 = 0; j0 < chunk.end; j0 = j1) {
    j1 = std::min({j0 + kDecodeBlockKeys, chunk.end, call.cache.page_end(j0)});
    const index_t keys = j1 - j0, columns = attnkit::detail::round_up(keys, kW);
    bool any = false, every = true;
    for (index_t r = 0; r < rows; ++r) {
      const std::span<const KeyRange> own = row_spans[static_cast<std::size_t>(r)];
      std::size_t& c = cursor[static_cast<std::size_t>(r)];
      while (c < own.size() && own[c].end <= j0) ++c;
      BlockCoverage& cover = coverage[static_cast<std::size_t>(r)];
      if (c == own.size() || own[c].begin >= j1) {
        cover = BlockCoverage::kNone;
      } else {
        cover = own[c].begin <= j0 && own[c].end >= j1 ? BlockCoverage::kFull : BlockCoverage::kPartial;
      }
      any = any || cover != BlockCoverage::kNone;
      every = every && cover == BlockCoverage::kFull;
    }
    if (!any) continue;

    // The keys some row attends (all of them when every row attends the whole block).
    std::fill(needed.begin(), needed.begin() + keys, every);
    if (!every) {
      for (index_t r = 0; r < rows; ++r) {
        const std::span<const KeyRange> own = row_spans[static_cast<std::size_t>(r)];
        for (std::size_t c = cursor[static_cast<std::size_t>(r)]; c < own.size() && own[c].begin < j1; ++c)
          std::fill(needed.begin() + (std::max(own[c].begin, j0) - j0),
                    needed.begin() + (std::min(own[c].end, j1) - j0), true);
      }
    }

    // Scores of the attended keys, a run of consecutive ones at a time; the other keys' columns
    // excluded for every row. Prefetches are spread over the work, one row requested per row
    // read (docs/architecture.md, "Decode": a burst for the whole block was slower than none):
    // the next block's K rows (in this chunk, up to its page's end) while this block is scored,
    // its V rows while this block's P V runs, so loads are in flight in both phases; the first
    // block an item reads prefetches its own V rows, kPrefetchKeys rows at a time.
    const E* first_key = call.cache.key(b, g, j0);
    const E* first_value = call.cache.value(b, g, j0);
    const index_t next_keys =
        j1 < chunk.end ? std::min({j1 + kDecodeBlockKeys, chunk.end, call.cache.page_end(j1)}) - j1 : 0;
    const simd::RowPrefetch<E> next_key_rows{next_keys > 0 ? call.cache.key(b, g, j1) : nullptr, key_stride, next_keys,
                                             key_elements};
    const simd::RowPrefetch<E> next_value_rows{next_keys > 0 ? call.cache.value(b, g, j1) : nullptr, cache_value_stride,
                                               next_keys, value_elements};
    const simd::RowPrefetch<E> own_value_rows{first_value, cache_value_stride, first_block ? keys : 0, value_elements};
    first_block = false;
    for (index_t c = 0; c < keys;) {
      if (!needed[static_cast<std::size_t>(c)]) {
        for (index_t r = 0; r < rows; ++r) work.scores[r * kStride + c] = kExcluded;
        ++c;
        continue;
      }
      index_t end = c + 1;
      while (end < keys && needed[static_cast<std::size_t>(end)]) ++end;
      // One call for the run, or kPrefetchKeys keys at a time between the first block's bursts.
      const index_t step = own_value_rows.count > 0 ? kPrefetchKeys : end - c;
      for (index_t c0 = c; c0 < end; c0 += step) {
        const index_t c1 = std::min(end, c0 + step);
        own_value_rows.rows(c0, c1);
        simd::key_dots(queries, call.query_stride, rows, first_key + c0 * key_stride, key_stride, c1 - c0, head_dim,
                       work.scores + c0, kStride, next_key_rows.from(c0));
      }
      c = end;
    }
    for (index_t r = 0; r < rows; ++r) {
      float* row = work.scores + r * kStride;
      const BlockCoverage cover = coverage[static_cast<std::size_t>(r)];
      if (cover == BlockCoverage::kNone) {
        std::fill(row, row + keys, kExcluded);
      } else if (cover == BlockCoverage::kPartial) {
        const std::span<const KeyRange> own = row_spans[static_cast<std::size_t>(r)];
        index_t kept_until = j0;
        for (std::size_t c = cursor[static_cast<std::size_t>(r)]; c < own.size() && own[c].begin < j1; ++c) {
          if (own[c].begin > kept_until) std::fill(row + (kept_until - j0), row + (own[c].begin - j0), kExcluded);
          kept_until = std::min(own[c].end, j1);
        }
        std::fill(row + (kept_until - j0), row + keys, kExcluded);
      }
      std::fill(row + keys, row + columns, kExcluded);
    }
    work.softmax.absorb_scores(work.scores, kStride, rows, columns);

    // V rows widened in registers when they hold whole vectors, else widened into L1 first.
    if (value_dim == value_stride) {
      if (every) {
        work.softmax.accumulate_widened<simd::ZeroWeights::kMultiply>(work.scores, kStride, first_value,
                                                                      cache_value_stride, padded_rows, keys,
                                                                      value_stride / kW, true, next_value_rows);
      } else {
        work.softmax.accumulate_widened<simd::ZeroWeights::kSkip>(work.scores, kStride, first_value, cache_value_stride,
                                                                  padded_rows, keys, value_stride / kW, true,
                                                                  next_value_rows);
      }
      continue;
    }
    for (index_t c = 0; c < keys; ++c) {
      if (!needed[static_cast<std::size_t>(c)]) continue;
      float* widened = work.values + c * value_stride;
      simd::widen_values(first_value + c * cache_value_stride, value_dim, widened);
      std::fill(widened + value_dim, widened + value_stride, 0.0f);
    }
    const ValueRows<float> values{work.values, value_stride};
    if (every) {
      work.softmax.accumulate<simd::ZeroWeights::kMultiply>(work.scores, kStride, values, padded_rows, keys,
                                                            value_stride / kW, true);
    } else {
      work.softmax.accumulate<simd::ZeroWeights::kSkip>(work.scores, kStride, values, padded_rows, keys,
                                                        value_stride / kW, true);
    }
  }
  for (index_t r = 0; r < rows; ++r) out_lse[r] = work.softmax.finish_row(r, out_rows + r * value_dim, value_dim);
}

}  // namespace attnkit::kernel
