#pragma once
// One work item of a decode call: every query row of one kv head's group against one chunk of
// its sequence's keys, each key read once (SPEC.md section 13). The result is a partial row
// per query row (its softmax over the chunk's attended keys, and that softmax's lse), merged
// with the other chunks' by kernel/decode_driver.hpp.

#include <algorithm>
#include <array>
#include <limits>
#include <span>
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
#include "attnkit/simd/q8_key_dots.hpp"
#include "attnkit/simd/value_accumulate.hpp"
#include "attnkit/simd/widening_load.hpp"

namespace attnkit::kernel {

/// Keys per softmax block inside a chunk, at most: scores of every row for these keys (one
/// stream of K rows), one online softmax update, then P V (one stream of V rows). A read probe
/// alternating between K and V every 64 rows of a float16 cache ran at 0.85 of the linear
/// probe, every 256 rows at 0.92, every 1024 at 0.97 (docs/notes/decode-streaming.md,
/// caches"); an item of one kv head's 4 rows (contiguous caches) takes its whole chunk as one
/// block (2048 keys: float16, bfloat16 and 8-bit calls 1.05-1.13x those with blocks of 512 over
/// memory, float 1.00-1.03x). Fewer keys when the item has many rows: its scores stay within
/// kDecodeBlockScores floats (an item of 8 kv heads, 32 rows: 512 keys; 2048 were not faster).
/// So a paged cache (items of every kv head) and a contiguous [B, Hk, L, D] one (items of one)
/// cut a chunk's softmax at different keys and differ in the last bits (SPEC.md section 13):
/// blocks sized by one head's rows made paged float16 decode 4-8% slower at 131072 tokens
/// (docs/notes/serving-modifiers.md), and blocks sized by every head's rows would make the
/// contiguous one 5-13% slower (the 512-key figures above).
inline constexpr index_t kDecodeBlockKeys = 2048;
inline constexpr index_t kDecodeBlockScores = 16384;

/// How far a stream is prefetched ahead of the row being read: 8 KiB of rows (16 rows of a
/// float cache at D = 128, 32 of float16, 60 of 8-bit blocks). On an AMD EPYC family 26, one
/// thread, 32768 keys: float read best 8-16 rows ahead (0.65 of the probe; 32 rows 0.62, 64
/// rows 0.59), float16 32-64 rows ahead (0.71-0.72; 8 rows 0.66, 16 rows 0.68).
inline constexpr index_t kDecodePrefetchBytes = 8192;

/// kDecodePrefetchBytes in rows of `elements` elements of E, rounded down to whole pages of
/// page_size tokens when a page holds fewer rows, so that the rows ahead cross a page where the
/// rows read do: 8-bit blocks over 16-token pages, 60 rows ahead against 48, ran 17% slower
/// while read_stream cut each page's reads in two where the rows ahead crossed a page, and
/// still 5% slower once it no longer did (StreamCursor::rows in two pieces; float16, 32 rows,
/// is a whole number of pages either way; docs/notes/decode-streaming.md).
template <class E>
index_t decode_prefetch_rows(index_t elements, index_t page_size) {
  const index_t rows = std::max<index_t>(1, kDecodePrefetchBytes / (elements * static_cast<index_t>(sizeof(E))));
  return rows > page_size ? rows / page_size * page_size : rows;
}

/// The keys of a block for an item of padded_rows rows: a multiple of 64 in [64, kDecodeBlockKeys].
inline index_t decode_block_keys(index_t padded_rows) {
  constexpr index_t kStep = 64;
  return std::clamp(kDecodeBlockScores / std::max<index_t>(padded_rows, 1) / kStep * kStep, kStep, kDecodeBlockKeys);
}

/// How one query row meets a block of keys.
enum class BlockCoverage { kNone, kPartial, kFull };

/// Per-thread scratch of a work item (detail::thread_scratch, reused across calls).
struct DecodeWorkspace {
  DecodeWorkspace(index_t padded_rows, index_t block_keys, index_t value_stride)
      : scores(attnkit::detail::thread_scratch<struct DecodeScoresTag, float>(padded_rows * block_keys)),
        values(attnkit::detail::thread_scratch<struct DecodeValuesTag, float>(kWidenedRunKeys * value_stride)),
        softmax(padded_rows, value_stride) {}
  /// V rows widened into L1 at a time (value dims that are not whole vectors).
  static constexpr index_t kWidenedRunKeys = 64;
  float* scores;  // [padded rows x block keys] scores, then weights; padded rows 0
  float* values;  // [kWidenedRunKeys x value_stride] V rows widened to float, zero past Dv
  OnlineSoftmax<float> softmax;
};

/// The rows one pass of a work item reads, in order: for each run of keys (sorted, each inside
/// one page), the run's K (or V) rows of each kv head of `heads` in turn.
struct DecodeStream {
  bool keys;  // K rows, else V rows
  index_t b;  // the sequence
  HeadRange heads;
  std::span<const KeyRange> runs;
};

/// A position in a stream and, after its end, in the stream read next: where the rows a kernel
/// prefetches while it reads earlier ones lie. It crosses runs, heads and pages, so a page of
/// fewer rows than the prefetch distance (vLLM's 16 tokens) is prefetched like a long one.
template <class E>
class StreamCursor {
 public:
  StreamCursor(const DecodeCall<E>& call, const DecodeStream& stream, const DecodeStream& next)
      : call_(call), streams_{stream, next} {
    settle();
  }

  /// The rows from the position to the end of its run and head, then those of the next run or
  /// head of the same stream (none past the end of both streams): the rows to prefetch while
  /// as many are read. Two pieces, so that a call reading one run of one head is not cut where
  /// its rows to prefetch cross a head or a page: with 64-token pages each run was two calls,
  /// and one call ran float16 1.05-1.12x faster over memory (docs/notes/decode-calls-and-blocks.md).
  simd::RowPrefetch<E> rows() const {
    simd::RowPrefetch<E> ahead = piece();
    if (ahead.count == 0) return ahead;
    StreamCursor following = *this;
    following.advance(ahead.count);
    if (following.stream_ != stream_) return ahead;  // K rows, then V rows: another stride and size
    const simd::RowPrefetch<E> then = following.piece();
    ahead.then = then.first;
    ahead.then_count = then.count;
    return ahead;
  }

  /// Moves n rows on in reading order.
  void advance(index_t n) {
    while (n > 0 && stream_ < streams_.size()) {
      const index_t step = std::min(n, rows_left());
      offset_ += step;
      n -= step;
      settle();
    }
  }

 private:
  const KeyRange& run() const { return streams_[stream_].runs[run_]; }

  /// Rows from the position to the end of its run and head (0 past the end of both streams).
  index_t rows_left() const { return stream_ < streams_.size() ? run().end - run().begin - offset_ : 0; }

  /// Those rows (none past the end of both streams).
  simd::RowPrefetch<E> piece() const {
    if (stream_ == streams_.size()) return {};
    const DecodeStream& stream = streams_[stream_];
    const index_t g = stream.heads.first + head_, from = run().begin + offset_;
    const DecodeGeometry& geometry = call_.geometry;
    const index_t elements = (stream.keys ? geometry.head_dim : geometry.value_dim) / kValuesPerElement<E>;
    if (stream.keys) return {call_.cache.key(stream.b, g, from), call_.cache.key_stride(), rows_left(), elements};
    return {call_.cache.value(stream.b, g, from), call_.cache.value_stride(), rows_left(), elements};
  }

  /// From the end of a run's rows of one head to the next head, run or stream.
  void settle() {
    while (stream_ < streams_.size()) {
      if (run_ == streams_[stream_].runs.size()) {
        ++stream_, run_ = 0;
        continue;
      }
      if (offset_ < run().end - run().begin) return;
      offset_ = 0;
      if (++head_ == streams_[stream_].heads.count) head_ = 0, ++run_;
    }
  }

  const DecodeCall<E>& call_;
  std::array<DecodeStream, 2> streams_;
  std::size_t stream_ = 0, run_ = 0;
  index_t head_ = 0, offset_ = 0;
};

/// Calls read(h, c0, c1, ahead) over `stream` (keys [c0, c1) of one of its runs for head h of
/// its heads, in reading order), split so that before the row at position p of the stream is
/// read, the one at p + ahead_rows is prefetched: in the stream, or else in `next` (the
/// stream read next: the block's V rows, the next block's K rows). `ahead` holds the rows to
/// prefetch, row j before key c0 + j; a split falls where those rows run out (StreamCursor::rows:
/// at the end of the next run or head after the one they start in, or of the stream).
template <class E, class Read>
void read_stream(const DecodeCall<E>& call, const DecodeStream& stream, const DecodeStream& next, index_t ahead_rows,
                 const Read& read) {
  StreamCursor<E> ahead(call, stream, next);
  ahead.advance(ahead_rows);
  for (const KeyRange& run : stream.runs) {
    for (index_t h = 0; h < stream.heads.count; ++h) {
      for (index_t c = run.begin; c < run.end;) {
        const simd::RowPrefetch<E> rows = ahead.rows();
        const index_t end = rows.size() == 0 ? run.end : std::min(run.end, c + rows.size());
        read(h, c, end, rows);
        ahead.advance(end - c);
        c = end;
      }
    }
  }
}

/// The keys from `from` on (before `limit`) in runs of one page each, as many as give at least
/// `rows` rows over `heads` kv heads: the start of a block's K stream, as the block before it
/// prefetches it (all of its keys attended, which is the common case; else some rows
/// prefetched are not read).
template <class E>
void leading_runs(const DecodeCall<E>& call, index_t from, index_t limit, index_t heads, index_t rows,
                  std::vector<KeyRange>& runs) {
  runs.clear();
  for (index_t covered = 0; from < limit && covered < rows;) {
    const index_t end = std::min(limit, call.cache.page_end(from));
    runs.push_back({from, end});
    covered += (end - from) * heads;
    from = end;
  }
}

/// The partial results of the group rows of kv heads `heads` in sequence b over the keys of
/// `chunk`: out_rows [heads.count x group rows x Dv] and out_lse [heads.count x group rows]
/// (natural log; -inf and zeros for a row attending none of the chunk's keys). Row r of head
/// h is query head (heads.first + h) * group + r / Lq, row r % Lq. Keys are visited in blocks
/// of decode_block_keys: the scores of the block's attended keys (its K rows in one pass, page
/// by page, each page head by head), then their P V (its V rows in one pass); a block no row
/// attends is not read, a key no row attends is not read, and keys a row does not attend are
/// excluded by selection (SPEC.md section 0), never multiplied. Each stream is prefetched
/// kDecodePrefetchBytes ahead of its reads, across runs, heads and pages, from the block's
/// K rows to its V rows and to the next block's K rows.
template <class E>
[[gnu::noinline]] void decode_chunk(const DecodeCall<E>& call, const DecodeSpans& spans, index_t b, HeadRange heads,
                                    const KeyRange& chunk, float* out_rows, float* out_lse) {
  constexpr index_t kW = static_cast<index_t>(simd::kWidth<float>);
  constexpr float kExcluded = attnkit::detail::kExcludedScore<float>;
  const DecodeGeometry& geometry = call.geometry;
  const index_t group_rows = geometry.group_rows(b), group = geometry.group(), q_len = geometry.rows(b);
  // Softmax rows: each head's group rows padded to a multiple of kValueRowBlock.
  const index_t head_rows = attnkit::detail::round_up(group_rows, simd::kValueRowBlock);
  const index_t rows = heads.count * group_rows, padded_rows = heads.count * head_rows;
  const index_t head_dim = geometry.head_dim, value_dim = geometry.value_dim;
  const index_t value_stride = attnkit::detail::round_up(value_dim, kW);
  const index_t block_keys = decode_block_keys(padded_rows), score_stride = block_keys;
  const index_t key_ahead = decode_prefetch_rows<E>(head_dim / kValuesPerElement<E>, call.cache.page_size());
  const index_t value_ahead = decode_prefetch_rows<E>(value_dim / kValuesPerElement<E>, call.cache.page_size());
  DecodeWorkspace work(padded_rows, block_keys, value_stride);
  const auto softmax_row = [&](index_t r) { return r / group_rows * head_rows + r % group_rows; };
  const auto head_scores = [&](index_t h) { return work.scores + h * head_rows * score_stride; };

  std::vector<std::span<const KeyRange>> row_spans(static_cast<std::size_t>(rows));
  std::vector<std::size_t> cursor(static_cast<std::size_t>(rows));
  for (index_t r = 0; r < rows; ++r) {
    const index_t head = (heads.first + r / group_rows) * group + r % group_rows / q_len;
    const std::span<const KeyRange> own = spans.row(geometry.row_id(b, head, r % group_rows % q_len));
    row_spans[static_cast<std::size_t>(r)] = own;
    cursor[static_cast<std::size_t>(r)] = static_cast<std::size_t>(
        std::partition_point(own.begin(), own.end(), [&](const KeyRange& s) { return s.end <= chunk.begin; }) -
        own.begin());
  }
  for (index_t h = 0; h < heads.count; ++h)
    std::fill(head_scores(h) + group_rows * score_stride, head_scores(h + 1), 0.0f);  // padding rows
  work.softmax.reset(padded_rows);

  std::vector<BlockCoverage> coverage(static_cast<std::size_t>(rows));
  std::array<bool, kDecodeBlockKeys> needed{};
  std::vector<KeyRange> runs;       // the block's attended keys: runs of consecutive keys, each inside one page
  std::vector<KeyRange> next_runs;  // the first pages of the next block's keys (leading_runs)
  const index_t sequence_end = geometry.lengths[static_cast<std::size_t>(b)];
  for (index_t j0 = chunk.begin, j1 = 0; j0 < chunk.end; j0 = j1) {
    j1 = std::min(j0 + block_keys, chunk.end);
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

    // The keys some row attends (all of them when every row attends the whole block), as runs.
    std::fill(needed.begin(), needed.begin() + keys, every);
    if (!every) {
      for (index_t r = 0; r < rows; ++r) {
        const std::span<const KeyRange> own = row_spans[static_cast<std::size_t>(r)];
        for (std::size_t c = cursor[static_cast<std::size_t>(r)]; c < own.size() && own[c].begin < j1; ++c)
          std::fill(needed.begin() + (std::max(own[c].begin, j0) - j0),
                    needed.begin() + (std::min(own[c].end, j1) - j0), true);
      }
    }
    runs.clear();
    for (index_t c = 0; c < keys;) {
      if (!needed[static_cast<std::size_t>(c)]) {
        for (index_t r = 0; r < rows; ++r) work.scores[softmax_row(r) * score_stride + c] = kExcluded;
        ++c;
        continue;
      }
      const index_t page_end = call.cache.page_end(j0 + c) - j0;
      index_t end = c + 1;
      while (end < std::min(keys, page_end) && needed[static_cast<std::size_t>(end)]) ++end;
      runs.push_back({j0 + c, j0 + end});
      c = end;
    }

    // Scores of the attended keys; the K stream is followed by the block's V rows.
    const DecodeStream key_stream{true, b, heads, runs}, value_stream{false, b, heads, runs};
    read_stream(call, key_stream, value_stream, key_ahead,
                [&](index_t h, index_t c0, index_t c1, const simd::RowPrefetch<E>& ahead) {
                  const index_t first_row = geometry.row_id(b, (heads.first + h) * group, 0);
                  if constexpr (std::is_same_v<E, q8_0_block>) {
                    if (call.quantized.active()) {
                      simd::q8_key_dots(call.quantized.from(first_row), group_rows,
                                        call.cache.key(b, heads.first + h, c0), call.cache.key_stride(), c1 - c0,
                                        head_dim, head_scores(h) + (c0 - j0), score_stride, ahead);
                      return;
                    }
                  }
                  simd::key_dots(call.queries + first_row * call.query_stride, call.query_stride, group_rows,
                                 call.cache.key(b, heads.first + h, c0), call.cache.key_stride(), c1 - c0, head_dim,
                                 head_scores(h) + (c0 - j0), score_stride, ahead);
                });
    if (call.modifiers.active()) {
      // Soft-capping and ALiBi on the scores read (the runs), before the exclusions below.
      for (index_t r = 0; r < rows; ++r) {
        if (coverage[static_cast<std::size_t>(r)] == BlockCoverage::kNone) continue;
        const index_t head = (heads.first + r / group_rows) * group + r % group_rows / q_len;
        const index_t position = sequence_end - q_len + r % group_rows % q_len;
        float* row = work.scores + softmax_row(r) * score_stride;
        for (const KeyRange& run : runs)
          modify_score_run(call.modifiers, row + (run.begin - j0), run.end - run.begin, head, position, run.begin);
      }
    }
    for (index_t r = 0; r < rows; ++r) {
      float* row = work.scores + softmax_row(r) * score_stride;
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
    for (index_t h = 0; h < heads.count; ++h)
      work.softmax.absorb_scores(head_scores(h), score_stride, group_rows, columns, h * head_rows);

    // P V over the attended keys' V rows, followed by the next block's K rows (the next
    // chunk's, after the chunk's last block: usually this thread's next item).
    leading_runs(call, j1, j1 < chunk.end ? chunk.end : sequence_end, heads.count, key_ahead, next_runs);
    read_stream(call, value_stream, DecodeStream{true, b, heads, next_runs}, value_ahead,
                [&](index_t h, index_t c0, index_t c1, const simd::RowPrefetch<E>& ahead) {
                  const index_t g = heads.first + h;
                  const bool first_segment = c0 == runs.front().begin;
                  if (value_dim == value_stride) {
                    // V rows widened in registers when they hold whole vectors; zero weights
                    // multiplied when every row attends the whole block (none are zero then).
                    const auto widened = [&]<simd::ZeroWeights kZero>() {
                      work.softmax.accumulate_widened<kZero>(head_scores(h) + (c0 - j0), score_stride,
                                                             call.cache.value(b, g, c0), call.cache.value_stride(),
                                                             h * head_rows, head_rows, c1 - c0, value_stride / kW,
                                                             first_segment, ahead);
                    };
                    if (every) {
                      widened.template operator()<simd::ZeroWeights::kMultiply>();
                    } else {
                      widened.template operator()<simd::ZeroWeights::kSkip>();
                    }
                    return;
                  }
                  // Else widened into L1 first, kWidenedRunKeys rows at a time.
                  for (index_t w0 = c0; w0 < c1; w0 += DecodeWorkspace::kWidenedRunKeys) {
                    const index_t w1 = std::min(c1, w0 + DecodeWorkspace::kWidenedRunKeys);
                    for (index_t c = w0; c < w1; ++c) {
                      float* widened = work.values + (c - w0) * value_stride;
                      simd::widen_values(call.cache.value(b, g, c), value_dim, widened);
                      std::fill(widened + value_dim, widened + value_stride, 0.0f);
                    }
                    const ValueRows<float> values{work.values, value_stride};
                    work.softmax.accumulate<simd::ZeroWeights::kSkip>(head_scores(h) + (w0 - j0), score_stride, values,
                                                                      head_rows, w1 - w0, value_stride / kW,
                                                                      w0 == runs.front().begin, h * head_rows);
                  }
                });
  }
  for (index_t r = 0; r < rows; ++r)
    out_lse[r] = work.softmax.finish_row(softmax_row(r), out_rows + r * value_dim, value_dim);
}

}  // namespace attnkit::kernel
