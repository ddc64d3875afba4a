#pragma once
// AttentionShape (the sizes of one call) and TileShape (the executor's tile geometry).

#include "attnkit/core/index.hpp"

namespace attnkit {

/// Sizes of one attention call (SPEC.md section 0):
/// Q [batch, q_heads, q_len, head_dim], K [batch, kv_heads, kv_len, head_dim],
/// V [batch, kv_heads, kv_len, value_dim], O [batch, q_heads, q_len, value_dim].
struct AttentionShape {
  index_t batch = 0;
  index_t q_heads = 0;
  index_t kv_heads = 0;
  index_t q_len = 0;
  index_t kv_len = 0;
  index_t head_dim = 0;
  index_t value_dim = 0;

  /// Query heads sharing one K/V head (grouped-query attention; 1 for multi-head).
  constexpr index_t group_size() const { return kv_heads > 0 ? q_heads / kv_heads : 0; }
  /// Bottom-right causal alignment: query i sits at key position i + causal_offset().
  constexpr index_t causal_offset() const { return kv_len - q_len; }

  friend constexpr bool operator==(const AttentionShape&, const AttentionShape&) = default;
};

/// Rows per tile of the tiled driver: `query_rows` queries against `key_rows` keys at a time.
/// Plans enumerate key ranges of at most `key_rows` keys for query ranges of at most
/// `query_rows` rows starting at multiples of `query_rows`.
/// The default is the geometry attnkit::attention runs. 32 query rows: the masked triangles
/// at the edges of a band (windows, causal diagonals) waste about query_rows / (band width +
/// query_rows) of the work, and measured full attention is as fast as with 64 rows (16 rows:
/// 4% slower). 256 keys per tile amortise the per-row softmax bookkeeping (max, rescale) over
/// more FMAs: with 128, a radius-256 window ran 7% slower per pair (more, shorter tiles per
/// query tile) and full attention no faster; the 32 x 256 score tile (32 KiB in fp32) still
/// fits L1.
struct TileShape {
  index_t query_rows = 32;
  index_t key_rows = 256;
};

/// A run of consecutive key positions [begin, end) visited as one tile. `needs_mask` is false
/// when every (query, key) pair of the tile is attended, so the driver skips the element
/// predicate; true when some pairs are not (they are then excluded by selection).
struct KeyTile {
  index_t begin = 0;
  index_t end = 0;
  bool needs_mask = false;

  friend constexpr bool operator==(const KeyTile&, const KeyTile&) = default;
};

/// Key positions [begin, end); empty when begin >= end.
struct KeyRange {
  index_t begin = 0;
  index_t end = 0;

  friend constexpr bool operator==(const KeyRange&, const KeyRange&) = default;
};

/// Positions in both ranges (0 when they do not overlap).
constexpr index_t overlap(const KeyRange& a, const KeyRange& b) {
  const index_t begin = a.begin > b.begin ? a.begin : b.begin, end = a.end < b.end ? a.end : b.end;
  return end > begin ? end - begin : 0;
}

}  // namespace attnkit
