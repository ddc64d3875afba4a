#pragma once
// What a decode call's work items share: the views and sizes of attention over a KV cache
// (DecodeCall) and every query row's attended keys (DecodeSpans).

#include <span>
#include <vector>

#include "attnkit/cache/cache_rows.hpp"
#include "attnkit/core/index.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/core/tensor_view.hpp"

namespace attnkit::kernel {

/// Keys per work item: a sequence's keys split into chunks of this many, whatever the thread
/// count, and the chunks' partial results merge in chunk order (SPEC.md section 13), so the
/// result is the same bits for every thread count and batch composition. 512 keys of a
/// D = 128 float cache are 256 KiB of K: a 131072-token context gives 256 chunks per kv head
/// (enough to balance two threads on one kv head), a 4096-token one 8.
inline constexpr index_t kDecodeChunkKeys = 512;

/// Attention of q [B, Hq, Lq, D] (element type Q) against the cache's rows (element type E):
/// query row i of sequence b sits at position lengths[b] - Lq + i; out [B, Hq, Lq, Dv] (Out),
/// lse [B, Hq, Lq, 1] or null.
template <class Q, class E, class Out>
struct DecodeCall {
  TensorView<const Q> q;
  attnkit::detail::CacheRows<const E> cache;
  std::span<const index_t> lengths;
  TensorView<Out> out;
  const TensorView<float>* lse;
  index_t batch;
  index_t q_heads;
  index_t kv_heads;
  index_t q_len;
  index_t head_dim;
  index_t value_dim;
  float scale;
  int threads;

  /// Query heads per kv head.
  index_t group() const { return q_heads / kv_heads; }
  /// Rows of one work item: every query row of a kv head's group.
  index_t group_rows() const { return group() * q_len; }
  /// Index of query row i of head h in sequence b among all B Hq Lq rows.
  index_t row_id(index_t b, index_t h, index_t i) const { return (b * q_heads + h) * q_len + i; }
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
