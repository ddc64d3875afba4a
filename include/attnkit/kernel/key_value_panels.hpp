#pragma once
// KeyValuePanels<T, S>: K (and V unless it is read in place) of one (batch, kv head), packed
// once for every query tile, in T from elements of type S.

#include <algorithm>
#include <atomic>
#include <memory>
#include <type_traits>

#include "attnkit/core/shape.hpp"
#include "attnkit/core/tensor_view.hpp"
#include "attnkit/detail/thread_scratch.hpp"
#include "attnkit/simd/batch.hpp"
#include "attnkit/simd/packing.hpp"

namespace attnkit::kernel {

/// Rows of V as the PV micro-kernel reads them: row j of a key range at rows + j * stride.
template <class T>
struct ValueRows {
  const T* rows;
  index_t stride;
};

/// Keys and values of one (batch, kv head) prepared once for every query tile of the group.
///   key_panel(t): [head_dim x key_rows] K^T of key tile t (keys t*key_rows ...), row-major,
///                 zero past kv_len, so score_tile streams it with aligned unit-stride loads.
///   value_rows(b, h, j): V rows from key j on. Read in place from V when the driver allows
///                 it (keys in sequence order and value_dim whole vectors: nothing to pad);
///                 else packed rows of value_stride elements, zero past value_dim (value_stride
///                 is value_dim rounded up to whole vectors), so the PV micro-kernel has no
///                 tails. Copying V cost ~3% of a sparse call, more than the rest of packing.
///   has_nonfinite_values(b, h, t): some V row of tile t holds NaN or Inf; masked tiles then
///                 skip zero weights instead of multiplying them (SPEC.md section 0). Found
///                 while packing, or for V read in place on the first ask (tiles only exact
///                 tiles use, as in block layouts, are never scanned).
/// A key range starting inside a tile is read in whole vectors and may run up to one vector
/// past its panel; the keys buffer carries one vector of slack so that stays in bounds.
/// K and V hold elements of type S: T itself, or a half type widened to T (float) while
/// packing, exactly, so the micro-kernels never see half values and V of a half call is
/// always packed.
/// Memory: kv_len rounded up to key_rows, times head_dim (+ value_stride unless in place)
/// elements of T.
template <class T, class S = T>
class KeyValuePanels {
 public:
  /// key_positions: the keys the plan iterates (Lk, or an OccurrencePlan's extent); V is read
  /// in place only when they are the rows themselves.
  KeyValuePanels(const AttentionShape& shape, const TileShape& tiles, const TensorView<const S>& v,
                 bool values_in_place, index_t key_positions)
      : v_(v),
        values_in_place_(std::is_same_v<S, T> && values_in_place),
        head_dim_(shape.head_dim),
        key_rows_(tiles.key_rows),
        key_positions_(key_positions),
        tile_count_(detail::ceil_div(key_positions, tiles.key_rows)),
        value_stride_(detail::round_up(shape.value_dim, static_cast<index_t>(simd::kWidth<T>))),
        keys_size_(tile_count_ * key_rows_ * head_dim_ + static_cast<index_t>(simd::kWidth<T>)),
        keys_(detail::thread_scratch<struct KeyPanelsTag, T>(keys_size_)),
        values_(values_in_place_
                    ? nullptr
                    : detail::thread_scratch<struct ValueRowsTag, T>(tile_count_ * key_rows_ * value_stride_)),
        value_check_(std::make_unique<std::atomic<unsigned char>[]>(static_cast<std::size_t>(tile_count_))) {}

  index_t tile_count() const { return tile_count_; }
  index_t value_stride() const { return value_stride_; }
  index_t value_vectors() const { return value_stride_ / static_cast<index_t>(simd::kWidth<T>); }
  const T* key_panel(index_t tile) const { return keys_ + tile * key_rows_ * head_dim_; }

  /// rows[c * head_dim + d] = the packed key at position first + c, element d, for c < count:
  /// keys read back out of the K^T panels (a SharedQueryKeyPlan's queries).
  void unpack_keys(index_t first, index_t count, T* rows) const {
    for (index_t begin = first; begin < first + count;) {
      const index_t tile = begin / key_rows_, end = std::min(first + count, (tile + 1) * key_rows_);
      const T* panel = key_panel(tile) + (begin - tile * key_rows_);
      simd::transpose_rows(
          head_dim_, end - begin, [&](index_t d) { return panel + d * key_rows_; }, rows + (begin - first) * head_dim_,
          head_dim_);
      begin = end;
    }
  }

  ValueRows<T> value_rows(index_t b, index_t h, index_t first_key) const {
    if constexpr (std::is_same_v<S, T>) {
      if (values_in_place_) return ValueRows<T>{v_.row(b, h, first_key), v_.stride(kSeq)};
    }
    return ValueRows<T>{values_ + first_key * value_stride_, value_stride_};
  }

  bool has_nonfinite_values(index_t b, index_t h, index_t tile) const {
    std::atomic<unsigned char>& check = value_check_[static_cast<std::size_t>(tile)];
    unsigned char state = check.load(std::memory_order_relaxed);
    if constexpr (std::is_same_v<S, T>) {  // half V is packed, so checked while packing
      if (state == kUnchecked) {           // in place only; threads asking together store the same answer
        const index_t first = tile * key_rows_;
        bool finite = true;
        for (index_t j = first; j < std::min(first + key_rows_, key_positions_) && finite; ++j) {
          finite = simd::all_finite(v_.row(b, h, j), v_.dim());
        }
        state = finite ? kFinite : kNonfinite;
        check.store(state, std::memory_order_relaxed);
      }
    }
    return state == kNonfinite;
  }

  /// Packs key tile `tile` of (batch b, kv head h), padding included (zeros), so nothing read
  /// later is uninitialised: key position p holds K/V row key_row(p) (a permutation of the
  /// rows, e.g. a dilated window's residue classes, or a many-to-one map of an OccurrencePlan;
  /// the identity when V is read in place), its key times key_scale(p) unless key_scale is
  /// simd::Unscaled (a SharedQueryKeyPlan's normalised keys).
  /// Tiles are independent: threads may pack different tiles concurrently.
  template <class KeyRow, class KeyScale>
  void pack_tile(const TensorView<const S>& k, index_t b, index_t h, index_t tile, KeyRow&& key_row,
                 KeyScale&& key_scale) {
    const index_t first = tile * key_rows_;
    const index_t count = std::min(key_rows_, key_positions_ - first);
    const bool finite = pack_rows(k, b, h, first, count, key_row, key_scale);
    T* panel = keys_ + tile * key_rows_ * head_dim_;
    if (count < key_rows_) {  // the last tile: zero columns past the last key position
      for (index_t d = 0; d < head_dim_; ++d)
        std::fill(panel + d * key_rows_ + count, panel + (d + 1) * key_rows_, T(0));
    }
    if (tile == tile_count_ - 1) std::fill(panel + head_dim_ * key_rows_, keys_ + keys_size_, T(0));  // the slack
    std::atomic<unsigned char>& check = value_check_[static_cast<std::size_t>(tile)];
    if (values_in_place_) {
      check.store(kUnchecked, std::memory_order_relaxed);
      return;
    }
    std::fill(values_ + (first + count) * value_stride_, values_ + (first + key_rows_) * value_stride_, T(0));
    check.store(finite ? kFinite : kNonfinite, std::memory_order_relaxed);
  }

  /// Repacks key positions [first, first + count) alone, as pack_tile would, in panels whose
  /// tiles were all packed before (a sliding window replacing its oldest rows: LSH packs one
  /// chunk per window instead of the whole window). Packed V only. A tile's non-finite flag
  /// then answers for its other rows too, read back from the panel (in cache).
  template <class KeyRow, class KeyScale>
  void repack_positions(const TensorView<const S>& k, index_t b, index_t h, index_t first, index_t count,
                        KeyRow&& key_row, KeyScale&& key_scale) {
    for (index_t begin = first; begin < first + count;) {
      const index_t tile = begin / key_rows_;
      const index_t tile_begin = tile * key_rows_, tile_end = std::min(tile_begin + key_rows_, key_positions_);
      const index_t end = std::min(first + count, tile_end);
      bool finite = pack_rows(k, b, h, begin, end - begin, key_row, key_scale);
      for (index_t p = tile_begin; p < tile_end && finite; ++p) {
        if (p < begin || p >= end) finite = simd::all_finite(values_ + p * value_stride_, v_.dim());
      }
      value_check_[static_cast<std::size_t>(tile)].store(finite ? kFinite : kNonfinite, std::memory_order_relaxed);
      begin = end;
    }
  }

 private:
  static constexpr unsigned char kUnchecked = 0, kFinite = 1, kNonfinite = 2;
  static constexpr index_t kWidenedColumns = 64;

  /// columns[d * key_rows + c] = row(c)[d] (times key_scale(position(c)) unless Unscaled).
  template <class RowPointer, class Position, class KeyScale>
  void transpose_keys(index_t rows, index_t cols, RowPointer&& row, T* columns, Position&& position,
                      KeyScale& key_scale) const {
    if constexpr (std::is_same_v<std::remove_cvref_t<KeyScale>, simd::Unscaled>) {
      simd::transpose_rows(rows, cols, row, columns, key_rows_);
    } else {
      simd::transpose_rows(rows, cols, row, columns, key_rows_, [&](index_t c) { return key_scale(position(c)); });
    }
  }

  /// K^T columns and (unless in place) V rows of key positions [first, first + count), inside
  /// one tile; returns whether those V rows are finite (true when V is read in place).
  template <class KeyRow, class KeyScale>
  bool pack_rows(const TensorView<const S>& k, index_t b, index_t h, index_t first, index_t count, KeyRow& key_row,
                 KeyScale& key_scale) {
    const index_t tile = first / key_rows_;
    T* columns = keys_ + tile * key_rows_ * head_dim_ + (first - tile * key_rows_);
    if constexpr (std::is_same_v<S, T>) {
      transpose_keys(
          count, head_dim_, [&](index_t c) { return k.row(b, h, key_row(first + c)); }, columns,
          [&](index_t c) { return first + c; }, key_scale);
    } else {
      // Half keys widen kWidth rows by kWidenedColumns columns at a time into a block on the
      // stack (in L1), which is then transposed like float rows.
      constexpr index_t kBlock = static_cast<index_t>(simd::kWidth<T>);
      alignas(64) T widened[kBlock * kWidenedColumns];
      for (index_t c0 = 0; c0 < count; c0 += kBlock) {
        const index_t rows = std::min(kBlock, count - c0);
        for (index_t d0 = 0; d0 < head_dim_; d0 += kWidenedColumns) {
          const index_t width = std::min(kWidenedColumns, head_dim_ - d0);
          for (index_t c = 0; c < rows; ++c)
            simd::widen_row(k.row(b, h, key_row(first + c0 + c)) + d0, width, widened + c * kWidenedColumns);
          transpose_keys(
              rows, width, [&](index_t c) { return static_cast<const T*>(widened + c * kWidenedColumns); },
              columns + d0 * key_rows_ + c0, [&](index_t c) { return first + c0 + c; }, key_scale);
        }
      }
    }
    bool finite = true;
    if (values_in_place_) return finite;
    for (index_t c = 0; c < count; ++c) {
      finite &= simd::copy_padded_row(v_.row(b, h, key_row(first + c)), v_.dim(), values_ + (first + c) * value_stride_,
                                      value_stride_);
    }
    return finite;
  }

  TensorView<const S> v_;
  bool values_in_place_;
  index_t head_dim_;
  index_t key_rows_;
  index_t key_positions_;
  index_t tile_count_;
  index_t value_stride_;
  index_t keys_size_;
  T* keys_;    // thread_scratch of the calling thread
  T* values_;  // thread_scratch of the calling thread; nullptr when V is read in place
  // Per key tile: kUnchecked, kFinite or kNonfinite (atomic: tiles are packed, and in-place
  // tiles checked, by several threads; a relaxed order suffices, as every thread that checks a
  // tile computes the same answer from the same input).
  std::unique_ptr<std::atomic<unsigned char>[]> value_check_;
};

}  // namespace attnkit::kernel
