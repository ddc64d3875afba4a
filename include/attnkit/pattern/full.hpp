#pragma once
// attnkit::Full: every query attends every key, optionally causal (SPEC.md section 1).

#include <algorithm>

#include "attnkit/core/cost.hpp"
#include "attnkit/core/detail/score_masking.hpp"
#include "attnkit/core/index.hpp"
#include "attnkit/core/shape.hpp"

namespace attnkit {

/// Full attention, mu_ij = 1; with `causal`, mu_ij = [j <= i + Lk - Lq] (bottom-right aligned,
/// as FlashAttention >= 2.1; PyTorch's is_causal is top-left, the same when Lq = Lk).
/// Usage: attnkit::Full{} or attnkit::Full{.causal = true}.
struct Full {
  bool causal = false;

  /// Keys [begin, end) row i attends: all, or under causal [0, i + offset] clipped to [0, Lk).
  static KeyRange row_keys(bool causal, index_t kv_len, index_t causal_offset, index_t i) {
    return KeyRange{0, causal ? std::clamp(i + causal_offset + 1, index_t{0}, kv_len) : kv_len};
  }

  /// Closed-form mask for one shape (the reference's ground truth).
  class Mask {
   public:
    Mask(bool causal, index_t kv_len, index_t causal_offset)
        : causal_(causal), kv_len_(kv_len), causal_offset_(causal_offset) {}
    int multiplicity(index_t /*head*/, index_t i, index_t j) const {
      return !causal_ || j <= i + causal_offset_ ? 1 : 0;
    }
    /// Attended keys of row i among `keys`: O(1).
    index_t count(index_t /*head*/, index_t i, const KeyRange& keys) const {
      return overlap(row_keys(causal_, kv_len_, causal_offset_, i), keys);
    }
    /// Calls f(KeyRange) for the attended runs of row i: one prefix of the keys.
    template <class F>
    void for_each_span(index_t /*head*/, index_t i, F&& f) const {
      const KeyRange r = row_keys(causal_, kv_len_, causal_offset_, i);
      if (r.begin < r.end) f(r);
    }

   private:
    bool causal_;
    index_t kv_len_;
    index_t causal_offset_;
  };
  /// Key tiles for a query tile: [0, Lk) in aligned steps of key_rows; causal stops after the
  /// last row's last key and marks tiles reaching past the first row's last key as masked
  /// (the diagonal band), so tiles wholly below the diagonal run without element masks.
  class Plan {
   public:
    Plan(bool causal, index_t kv_len, index_t causal_offset, index_t key_rows)
        : causal_(causal), kv_len_(kv_len), causal_offset_(causal_offset), key_rows_(key_rows) {}

    template <class Visit>
    void for_each_key_tile(index_t /*head*/, index_t q_begin, index_t q_end, Visit&& visit) const {
      // Keys [0, end) are attended by some row of the tile, [0, unmasked_end) by every row.
      const index_t end = causal_ ? std::clamp(q_end + causal_offset_, index_t{0}, kv_len_) : kv_len_;
      const index_t unmasked_end = causal_ ? std::clamp(q_begin + causal_offset_ + 1, index_t{0}, kv_len_) : kv_len_;
      for (index_t begin = 0; begin < end; begin += key_rows_) {
        const index_t tile_end = std::min(begin + key_rows_, end);
        visit(KeyTile{begin, tile_end, tile_end > unmasked_end});
      }
    }
    template <class T>
    void exclude(index_t /*head*/, index_t i, const KeyTile& tile, T* scores) const {
      detail::exclude_outside(row_keys(causal_, kv_len_, causal_offset_, i), tile, scores);
    }

   private:
    bool causal_;
    index_t kv_len_;
    index_t causal_offset_;
    index_t key_rows_;
  };

  Mask mask(const AttentionShape& shape) const { return Mask(causal, shape.kv_len, shape.causal_offset()); }

  Plan plan(const AttentionShape& shape, const TileShape& tiles) const {
    return Plan(causal, shape.kv_len, shape.causal_offset(), tiles.key_rows);
  }

  /// Pairs per head: Lq * Lk; causal: with m = min(Lq, Lk), rows before the last m see no key
  /// and the last m rows see Lk - m + 1 ... Lk keys: m (Lk - m) + m (m + 1) / 2.
  PatternCost cost(const AttentionShape& shape) const {
    const double lq = static_cast<double>(shape.q_len);
    const double lk = static_cast<double>(shape.kv_len);
    const double m = std::min(lq, lk);
    return softmax_cost(causal ? m * (lk - m) + m * (m + 1) / 2 : lq * lk, shape);
  }
};

}  // namespace attnkit
