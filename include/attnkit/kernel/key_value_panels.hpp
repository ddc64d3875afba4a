#pragma once
// KeyValuePanels<T>: K and V of one (batch, kv head), packed once for every query tile.

#include <algorithm>
#include <cmath>
#include <vector>

#include "attnkit/core/shape.hpp"
#include "attnkit/core/tensor_view.hpp"
#include "attnkit/detail/thread_scratch.hpp"
#include "attnkit/simd/batch.hpp"
#include "attnkit/simd/packing.hpp"

namespace attnkit::kernel {

/// Packed keys and values of one (batch, kv head), reused by all query tiles of the group.
///   key_panel(t): [head_dim x key_rows] K^T of key tile t (keys t*key_rows ...), row-major,
///                 zero past kv_len, so score_tile streams it with aligned unit-stride loads.
///   value_rows(j): [value_stride] row j of V, zero past value_dim (value_stride is value_dim
///                 rounded up to whole vectors), so the PV micro-kernel has no tails.
///   has_nonfinite_values(t): some V row of tile t holds NaN or Inf; masked tiles then skip
///                 zero weights instead of multiplying them (SPEC.md section 0).
/// A key range starting inside a tile is read in whole vectors and may run up to one vector
/// past its panel; the keys buffer carries one vector of slack so that stays in bounds.
/// Memory: kv_len rounded up to key_rows, times (head_dim + value_stride) elements.
template <class T>
class KeyValuePanels {
 public:
  KeyValuePanels(const AttentionShape& shape, const TileShape& tiles)
      : head_dim_(shape.head_dim),
        key_rows_(tiles.key_rows),
        tile_count_(detail::ceil_div(shape.kv_len, tiles.key_rows)),
        value_stride_(detail::round_up(shape.value_dim, static_cast<index_t>(simd::kWidth<T>))),
        keys_size_(tile_count_ * key_rows_ * head_dim_ + static_cast<index_t>(simd::kWidth<T>)),
        keys_(detail::thread_scratch<struct KeyPanelsTag, T>(keys_size_)),
        values_(detail::thread_scratch<struct ValueRowsTag, T>(tile_count_ * key_rows_ * value_stride_)),
        nonfinite_(static_cast<std::size_t>(tile_count_), 0) {}

  index_t tile_count() const { return tile_count_; }
  index_t value_stride() const { return value_stride_; }
  index_t value_vectors() const { return value_stride_ / static_cast<index_t>(simd::kWidth<T>); }
  const T* key_panel(index_t tile) const { return keys_ + tile * key_rows_ * head_dim_; }
  const T* value_rows(index_t first_key) const { return values_ + first_key * value_stride_; }
  bool has_nonfinite_values(index_t tile) const { return nonfinite_[static_cast<std::size_t>(tile)] != 0; }

  /// Packs key tile `tile` of (batch b, kv head h), padding included (zeros), so nothing read
  /// later is uninitialised: key position p holds K/V row key_row(p) (a permutation of the
  /// rows, e.g. a dilated window's residue classes). Tiles are independent: threads may pack
  /// different tiles concurrently.
  template <class KeyRow>
  void pack_tile(const TensorView<const T>& k, const TensorView<const T>& v, index_t b, index_t h, index_t tile,
                 KeyRow&& key_row) {
    const index_t first = tile * key_rows_;
    const index_t count = std::min(key_rows_, k.seq() - first);
    T* panel = keys_ + tile * key_rows_ * head_dim_;
    simd::transpose_rows(count, head_dim_, [&](index_t c) { return k.row(b, h, key_row(first + c)); }, panel, key_rows_);
    for (index_t d = 0; d < head_dim_; ++d) std::fill(panel + d * key_rows_ + count, panel + (d + 1) * key_rows_, T(0));
    if (tile == tile_count_ - 1) {  // the slack vector after the last panel
      std::fill(panel + head_dim_ * key_rows_, keys_ + keys_size_, T(0));
    }
    bool nonfinite = false;
    const index_t value_dim = v.dim();
    for (index_t c = 0; c < key_rows_; ++c) {
      T* packed = values_ + (first + c) * value_stride_;
      index_t filled = 0;
      if (c < count) {
        const T* value = v.row(b, h, key_row(first + c));
        std::copy(value, value + value_dim, packed);
        nonfinite |= !simd::all_finite(packed, value_dim);
        filled = value_dim;
      }
      std::fill(packed + filled, packed + value_stride_, T(0));
    }
    nonfinite_[static_cast<std::size_t>(tile)] = nonfinite;
  }

 private:
  index_t head_dim_;
  index_t key_rows_;
  index_t tile_count_;
  index_t value_stride_;
  index_t keys_size_;
  T* keys_;    // thread_scratch of the calling thread
  T* values_;  // thread_scratch of the calling thread
  std::vector<unsigned char> nonfinite_;  // one flag per key tile (not vector<bool>: tiles are packed concurrently)
};

}  // namespace attnkit::kernel
