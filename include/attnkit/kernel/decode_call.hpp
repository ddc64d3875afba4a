#pragma once
// What a decode call's work items share: the views and sizes of attention over a KV cache
// (DecodeGeometry, DecodeCall) and every query row's attended keys (DecodeSpans).

#include <span>
#include <vector>

#include "attnkit/cache/cache_rows.hpp"
#include "attnkit/cache/decode_rules.hpp"
#include "attnkit/core/index.hpp"
#include "attnkit/core/score_modifiers.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/simd/q8_key_dots.hpp"

namespace attnkit::kernel {

/// Keys per work item: a sequence's keys split into chunks of this many, whatever the thread
/// count, and the chunks' partial results merge in chunk order (SPEC.md section 13), so the
/// result is the same bits for every thread count and batch composition. 2048 keys of a
/// D = 128 float cache are 1 MiB of K: a 131072-token context gives 64 chunks per kv head
/// (enough to balance two threads on one kv head), a 4096-token one 2. With chunks of 512,
/// whose first block had nothing prefetched ahead of it, float16 decode over memory ran 4-8%
/// slower (docs/notes/decode-streaming.md); an item's last block now prefetches
/// the next chunk's first K rows.
inline constexpr index_t kDecodeChunkKeys = 2048;

/// The sizes of a call over a cache: sequence b (of B) has rows(b) query rows, row i at
/// position lengths[b] - rows(b) + i; Hq query heads share Hk kv heads; head dim D, value dim
/// Dv. query_offsets (B + 1 entries from 0, flash-attn's cu_seqlens_q) count the rows before
/// each sequence's. q, out and lse are [B, Hq, Lq, .] (every rows(b) = Lq), or packed
/// [1, Hq, total, .] with sequence b's rows from query_offsets[b] on (view_batch, view_row).
struct DecodeGeometry {
  std::span<const index_t> lengths;
  std::span<const index_t> query_offsets;
  bool packed;
  index_t batch;
  index_t q_heads;
  index_t kv_heads;
  index_t head_dim;
  index_t value_dim;

  /// Query heads per kv head.
  index_t group() const { return q_heads / kv_heads; }
  /// Query rows of sequence b (per head).
  index_t rows(index_t b) const {
    return query_offsets[static_cast<std::size_t>(b) + 1] - query_offsets[static_cast<std::size_t>(b)];
  }
  /// Whether sequence b runs the decode schedule (at most kDecodeScheduleRows rows; more run
  /// the prefill schedule, kernel/cache_prefill.hpp).
  bool on_decode_schedule(index_t b) const { return rows(b) <= kDecodeScheduleRows; }
  /// Rows of one work item of sequence b: every query row of a kv head's group.
  index_t group_rows(index_t b) const { return group() * rows(b); }
  /// Index of query row i of head h in sequence b among all Hq total rows: sequence by
  /// sequence, head by head.
  index_t row_id(index_t b, index_t h, index_t i) const {
    return query_offsets[static_cast<std::size_t>(b)] * q_heads + h * rows(b) + i;
  }
  /// Where row i of sequence b lies in q, out and lse: view.row(view_batch(b), h, view_row(b, i)).
  index_t view_batch(index_t b) const { return packed ? 0 : b; }
  index_t view_row(index_t b, index_t i) const { return packed ? query_offsets[static_cast<std::size_t>(b)] + i : i; }
};

/// query_offsets of B sequences of Lq rows each: 0, Lq, 2 Lq, ...
inline std::vector<index_t> uniform_query_offsets(index_t batch, index_t q_len) {
  std::vector<index_t> offsets(static_cast<std::size_t>(batch) + 1);
  for (index_t b = 0; b <= batch; ++b) offsets[static_cast<std::size_t>(b)] = b * q_len;
  return offsets;
}

/// What the work items of a decode call over a cache of element type E read: the geometry,
/// the cache's rows, and every query row widened to float and scaled by sigma log2(e) (base-2
/// scores, as the tiled driver's), row_id(b, h, i) at queries + row_id * query_stride, zero
/// from D up to query_stride (a multiple of the vector width). The queries' and the output's
/// element types stay out of it, so the kernels are compiled once per cache type. modifiers:
/// the score modifiers of SPEC.md section 14 (off by default). quantized: the 8-bit query mode
/// (only over q8_0_block caches): every row quantized, its scales times sigma log2(e), indexed
/// by row_id like queries; the scores are then integer dot products (simd::q8_key_dots) and
/// queries is not read.
template <class E>
struct DecodeCall {
  DecodeGeometry geometry;
  attnkit::detail::CacheRows<const E> cache;
  const float* queries;
  index_t query_stride;
  ScoreModifiers modifiers = {};
  simd::Q8Queries quantized = {};
};

/// The kv heads of one work item, [first, first + count): one, or all of them when the heads'
/// rows of a page lie together (CacheRows::heads_share_pages), read page by page.
struct HeadRange {
  index_t first;
  index_t count;
};

/// The attended keys of every query row: row_id's keys are the sorted, disjoint, non-empty
/// runs spans[offsets[id] .. offsets[id + 1]).
struct DecodeSpans {
  std::vector<KeyRange> spans;
  std::vector<index_t> offsets{0};

  std::span<const KeyRange> row(index_t id) const {
    return std::span<const KeyRange>(spans.data() + offsets[static_cast<std::size_t>(id)],
                                     spans.data() + offsets[static_cast<std::size_t>(id) + 1]);
  }
};

}  // namespace attnkit::kernel
