#pragma once
// Helpers plans use to implement KeyTilePlan::exclude: they overwrite the scores of excluded
// keys with -inf in one query's row of the score tile (selection, never arithmetic).

#include <algorithm>
#include <limits>

#include "attnkit/core/index.hpp"
#include "attnkit/core/shape.hpp"

namespace attnkit::detail {

template <class T>
inline constexpr T kExcludedScore = -std::numeric_limits<T>::infinity();

/// Keeps the keys of `tile` inside `allowed` and excludes the rest: two contiguous fills.
/// `scores` is the row of keys [tile.begin, tile.end).
template <class T>
void exclude_outside(const KeyRange& allowed, const KeyTile& tile, T* scores) {
  const index_t keys = tile.end - tile.begin;
  const index_t first = std::clamp(allowed.begin - tile.begin, index_t{0}, keys);
  const index_t last = std::clamp(allowed.end - tile.begin, first, keys);
  std::fill(scores, scores + first, kExcludedScore<T>);
  std::fill(scores + last, scores + keys, kExcludedScore<T>);
}

/// Excludes the keys of `tile` inside `excluded` (clipped to the tile).
template <class T>
void exclude_inside(const KeyRange& excluded, const KeyTile& tile, T* scores) {
  const index_t begin = std::max(excluded.begin, tile.begin), end = std::min(excluded.end, tile.end);
  if (begin < end) std::fill(scores + (begin - tile.begin), scores + (end - tile.begin), kExcludedScore<T>);
}

/// Keeps only the keys of `tile` listed in the sorted positions [first, last) and excludes
/// the gaps between them.
template <class T, class Iterator>
void exclude_all_but(Iterator first, Iterator last, const KeyTile& tile, T* scores) {
  index_t kept_until = tile.begin;  // keys before this are decided
  for (first = std::lower_bound(first, last, tile.begin); first != last && *first < tile.end; ++first) {
    exclude_inside(KeyRange{kept_until, *first}, tile, scores);
    kept_until = *first + 1;
  }
  exclude_inside(KeyRange{kept_until, tile.end}, tile, scores);
}

}  // namespace attnkit::detail
