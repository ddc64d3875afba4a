#pragma once
// attnkit::BlockLayout: which key blocks each query block attends (SPEC.md section 5).

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "attnkit/core/errors.hpp"
#include "attnkit/core/index.hpp"

namespace attnkit {

/// A {0,1} matrix of query_blocks x key_blocks stored as sorted key-block lists per query-block
/// row (compressed rows): O(query_blocks + nonzeros) memory, never a dense n x n mask.
class BlockLayout {
 public:
  /// From a row-major bitmap of query_blocks * key_blocks entries (nonzero = attend).
  static BlockLayout from_bitmap(index_t query_blocks, index_t key_blocks, const std::vector<std::uint8_t>& bits) {
    require_counts(query_blocks, key_blocks);
    if (static_cast<index_t>(bits.size()) != query_blocks * key_blocks) {
      detail::reject("BlockLayout::from_bitmap: bits.size()", bits.size(),
                     "must equal query_blocks * key_blocks = " + std::to_string(query_blocks * key_blocks));
    }
    BlockLayout layout(key_blocks);
    for (index_t p = 0; p < query_blocks; ++p) {
      for (index_t kb = 0; kb < key_blocks; ++kb)
        if (bits[static_cast<std::size_t>(p * key_blocks + kb)] != 0) layout.columns_.push_back(kb);
      layout.offsets_.push_back(static_cast<index_t>(layout.columns_.size()));
    }
    return layout;
  }

  /// From one strictly increasing list of key blocks per query-block row.
  static BlockLayout from_rows(index_t key_blocks, const std::vector<std::vector<index_t>>& rows) {
    require_counts(static_cast<index_t>(rows.size()), key_blocks);
    BlockLayout layout(key_blocks);
    for (std::size_t p = 0; p < rows.size(); ++p) {
      for (std::size_t e = 0; e < rows[p].size(); ++e) {
        const index_t kb = rows[p][e];
        const auto where = [&] {
          return "BlockLayout::from_rows: rows[" + std::to_string(p) + "][" + std::to_string(e) + "]";
        };
        if (kb < 0 || kb >= key_blocks)
          detail::reject(where(), kb, "must lie in [0, key_blocks = " + std::to_string(key_blocks) + ")");
        if (e > 0 && kb <= rows[p][e - 1])
          detail::reject(where(), kb, "rows must be strictly increasing (sorted, no duplicates)");
        layout.columns_.push_back(kb);
      }
      layout.offsets_.push_back(static_cast<index_t>(layout.columns_.size()));
    }
    return layout;
  }

  index_t query_blocks() const { return static_cast<index_t>(offsets_.size()) - 1; }
  index_t key_blocks() const { return key_blocks_; }
  index_t nonzeros() const { return static_cast<index_t>(columns_.size()); }

  /// Sorted key blocks of query-block row p.
  std::span<const index_t> row(index_t p) const {
    return std::span<const index_t>(columns_.data() + offsets_[static_cast<std::size_t>(p)],
                                    columns_.data() + offsets_[static_cast<std::size_t>(p) + 1]);
  }
  /// Whether query block p attends key block kb (binary search, O(log row length)).
  bool contains(index_t p, index_t kb) const {
    const auto r = row(p);
    return std::binary_search(r.begin(), r.end(), kb);
  }

  friend bool operator==(const BlockLayout&, const BlockLayout&) = default;

 private:
  explicit BlockLayout(index_t key_blocks) : key_blocks_(key_blocks), offsets_{0} {}
  static void require_counts(index_t query_blocks, index_t key_blocks) {
    if (query_blocks < 0) detail::reject("BlockLayout: query_blocks", query_blocks, "must be >= 0");
    if (key_blocks < 0) detail::reject("BlockLayout: key_blocks", key_blocks, "must be >= 0");
  }

  index_t key_blocks_;
  std::vector<index_t> offsets_;  // [query_blocks + 1] into columns_
  std::vector<index_t> columns_;  // key blocks, sorted within each row
};

}  // namespace attnkit
