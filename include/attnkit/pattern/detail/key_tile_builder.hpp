#pragma once
// KeyTileBuilder: turns the key ranges a plan finds for one query tile into the driver's
// KeyTiles (aligned, merged, marked masked or not).

#include <algorithm>
#include <vector>

#include "attnkit/core/index.hpp"
#include "attnkit/core/shape.hpp"

namespace attnkit::detail {

/// Collects key ranges in nondecreasing order of their begin (they may overlap) and emits
/// KeyTiles to `visit`: each range is cut at multiples of key_rows, and pieces in the same
/// aligned run of key_rows keys become one tile spanning them. A merged tile runs unmasked
/// only when its unmasked pieces cover all of it. Call finish() after the last range.
template <class Visit>
class KeyTileBuilder {
 public:
  KeyTileBuilder(index_t key_rows, Visit& visit) : key_rows_(key_rows), visit_(visit) {}

  /// Keys `range` are attended by some query of the tile; those inside `common` by every one.
  void add(const KeyRange& range, const KeyRange& common) {
    for (index_t begin = range.begin; begin < range.end;) {
      const index_t end = std::min(range.end, (begin / key_rows_ + 1) * key_rows_);
      add_piece(KeyTile{begin, end, begin < common.begin || end > common.end});
      begin = end;
    }
  }

  /// One piece inside a single aligned run of key_rows keys.
  void add_piece(const KeyTile& piece) {
    if (piece.begin >= piece.end) return;
    if (pending_.begin < pending_.end && pending_.begin / key_rows_ == piece.begin / key_rows_) {
      // Pieces arrive in order of begin, so unmasked coverage from pending_.begin can only
      // grow by a piece starting inside it.
      if (!piece.needs_mask && piece.begin <= covered_until_) covered_until_ = std::max(covered_until_, piece.end);
      pending_.end = std::max(pending_.end, piece.end);
      return;
    }
    finish();
    pending_ = piece;
    covered_until_ = piece.needs_mask ? piece.begin : piece.end;
  }

  /// Emits the tile still being merged.
  void finish() {
    if (pending_.begin < pending_.end) visit_(KeyTile{pending_.begin, pending_.end, covered_until_ < pending_.end});
    pending_ = KeyTile{};
  }

 private:
  index_t key_rows_;
  Visit& visit_;
  KeyTile pending_{};          // the tile being merged; empty when none
  index_t covered_until_ = 0;  // keys [pending_.begin, covered_until_) lie in unmasked pieces
};

/// The key tiles a plan visits for query positions [q_begin, q_end), in order (combinators
/// merge the lists of their operands). The list is a thread_local buffer per Plan type,
/// reused (no allocation per query tile), valid until the next call for the same Plan type
/// on this thread; a plan cannot contain its own type, so nested combinators do not clash.
template <class Plan>
const std::vector<KeyTile>& collect_key_tiles(const Plan& plan, index_t head, index_t q_begin, index_t q_end) {
  thread_local std::vector<KeyTile> tiles;
  tiles.clear();
  plan.for_each_key_tile(head, q_begin, q_end, [&](const KeyTile& tile) { tiles.push_back(tile); });
  return tiles;
}

}  // namespace attnkit::detail
