#pragma once
// attnkit::BlockSparse: attention restricted to a block layout per head, with BlockBERT
// helpers (SPEC.md section 5).

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "attnkit/core/cost.hpp"
#include "attnkit/core/detail/score_masking.hpp"
#include "attnkit/core/errors.hpp"
#include "attnkit/core/index.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/pattern/block_layout.hpp"
#include "attnkit/pattern/detail/key_tile_builder.hpp"

namespace attnkit {

/// mu_ij = L_h[floor(i / b)][floor(j / b)], and with `causal` additionally j <= i. Block p
/// covers positions [p b, min((p + 1) b, n)): the last block may be ragged. One layout shared
/// by all query heads, or one per query head. A call needs ceil(Lq / b) query blocks and
/// ceil(Lk / b) key blocks in every layout.
class BlockSparse {
  /// What Mask and Plan need of the pattern; the layouts are shared, so copies are cheap.
  struct Spec {
    index_t block_size;
    bool causal;
    std::shared_ptr<const std::vector<BlockLayout>> layouts;

    index_t layout_index(index_t head) const { return table_of_head(static_cast<index_t>(layouts->size()), head); }
    const BlockLayout& layout_for(index_t head) const {
      return (*layouts)[static_cast<std::size_t>(layout_index(head))];
    }
    bool allows(index_t head, index_t i, index_t j) const {
      return layout_for(head).contains(i / block_size, j / block_size) && (!causal || j <= i);
    }
  };

 public:
  BlockSparse(index_t block_size, std::vector<BlockLayout> layouts, bool causal = false)
      : spec_{block_size, causal, std::make_shared<const std::vector<BlockLayout>>(std::move(layouts))} {
    if (block_size <= 0) detail::reject("BlockSparse: block_size", block_size, "must be >= 1");
    const auto& all = *spec_.layouts;
    if (all.empty()) detail::reject("BlockSparse: layouts.size()", 0, "must be >= 1 (one shared or one per head)");
    for (std::size_t h = 1; h < all.size(); ++h) {
      const BlockLayout& layout = all[h];
      if (layout.query_blocks() != all.front().query_blocks() || layout.key_blocks() != all.front().key_blocks()) {
        detail::reject("BlockSparse: layouts[" + std::to_string(h) + "] blocks",
                       std::to_string(layout.query_blocks()) + " x " + std::to_string(layout.key_blocks()),
                       "every layout must have the block counts of layouts[0]");
      }
    }
  }

  /// BlockBERT (arXiv 1911.02972): head h lets query block p attend only key block pi_h(p).
  /// `permutations[h]` is a permutation of [0, blocks) (all of the same length).
  static BlockSparse blockbert(index_t block_size, const std::vector<std::vector<index_t>>& permutations) {
    std::vector<BlockLayout> layouts;
    for (std::size_t h = 0; h < permutations.size(); ++h) {
      const auto& pi = permutations[h];
      const index_t blocks = static_cast<index_t>(pi.size());
      std::vector<bool> seen(pi.size(), false);
      std::vector<std::vector<index_t>> rows;
      for (std::size_t p = 0; p < pi.size(); ++p) {
        if (pi[p] < 0 || pi[p] >= blocks || seen[static_cast<std::size_t>(pi[p])]) {
          detail::reject("BlockSparse::blockbert: permutations[" + std::to_string(h) + "][" + std::to_string(p) + "]",
                         pi[p], "each row must be a permutation of [0, " + std::to_string(blocks) + ")");
        }
        seen[static_cast<std::size_t>(pi[p])] = true;
        rows.push_back({pi[p]});
      }
      layouts.push_back(BlockLayout::from_rows(blocks, rows));
    }
    return BlockSparse(block_size, std::move(layouts));
  }

  /// BlockBERT with cyclic shifts: pi_h(p) = (p + shifts[h]) mod blocks (0 = a local head).
  static BlockSparse cyclic_shifts(index_t block_size, index_t blocks, const std::vector<index_t>& shifts) {
    if (blocks <= 0) detail::reject("BlockSparse::cyclic_shifts: blocks", blocks, "must be >= 1");
    std::vector<std::vector<index_t>> permutations;
    for (index_t shift : shifts) {
      std::vector<index_t> pi(static_cast<std::size_t>(blocks));
      for (index_t p = 0; p < blocks; ++p) pi[static_cast<std::size_t>(p)] = ((p + shift) % blocks + blocks) % blocks;
      permutations.push_back(std::move(pi));
    }
    return blockbert(block_size, permutations);
  }

  /// Block-diagonal (local) attention: query block p attends key block p only, over `blocks`
  /// blocks; with `causal`, keys j <= i inside it (MASFormer's causal block attention).
  static BlockSparse local(index_t block_size, index_t blocks, bool causal = false) {
    if (blocks <= 0) detail::reject("BlockSparse::local: blocks", blocks, "must be >= 1");
    std::vector<std::vector<index_t>> rows(static_cast<std::size_t>(blocks));
    for (index_t p = 0; p < blocks; ++p) rows[static_cast<std::size_t>(p)] = {p};
    return BlockSparse(block_size, {BlockLayout::from_rows(blocks, rows)}, causal);
  }

  index_t block_size() const { return spec_.block_size; }
  bool causal() const { return spec_.causal; }
  const std::vector<BlockLayout>& layouts() const { return *spec_.layouts; }

  class Mask {
   public:
    Mask(Spec spec, index_t kv_len) : spec_(std::move(spec)), kv_len_(kv_len) {}
    int multiplicity(index_t head, index_t i, index_t j) const { return spec_.allows(head, i, j) ? 1 : 0; }
    /// Attended keys of row i among `keys`: O(blocks listed in its block row).
    index_t count(index_t head, index_t i, const KeyRange& keys) const {
      index_t total = 0;
      for_each_span(head, i, [&](const KeyRange& span) { total += overlap(span, keys); });
      return total;
    }
    /// Calls f(KeyRange) for the listed blocks of row i's block row, in order (cut at i under
    /// causal).
    template <class F>
    void for_each_span(index_t head, index_t i, F&& f) const {
      const index_t b = spec_.block_size;
      const index_t last = spec_.causal ? std::min(kv_len_, i + 1) : kv_len_;
      for (index_t kb : spec_.layout_for(head).row(i / b)) {
        const index_t begin = kb * b, end = std::min(begin + b, last);
        if (begin < end) f(KeyRange{begin, end});
      }
    }

   private:
    Spec spec_;
    index_t kv_len_;
  };
  /// Key tiles of a query tile, enumerated on the fly from the layout rows it meets (a k-way
  /// merge of their sorted key-block lists): nothing is precomputed or allocated per call
  /// beyond one cursor per block row.
  class Plan {
   public:
    Plan(Spec spec, const AttentionShape& shape, const TileShape& tiles)
        : spec_(std::move(spec)), kv_len_(shape.kv_len), key_rows_(tiles.key_rows) {}

    template <class Visit>
    void for_each_key_tile(index_t head, index_t q_begin, index_t q_end, Visit&& visit) const {
      const BlockLayout& layout = spec_.layout_for(head);
      const index_t b = spec_.block_size;
      const index_t first_row = q_begin / b, rows = (q_end - 1) / b - first_row + 1;
      std::vector<index_t> cursor(static_cast<std::size_t>(rows), 0);  // next entry of each block row
      detail::KeyTileBuilder tiles(key_rows_, visit);
      while (true) {
        // The smallest key block not yet visited, how many block rows list it and where the
        // last of those rows ends inside the tile (causal: no key after it is attended).
        index_t kb = -1, listed = 0, last_row_end = 0;
        for (index_t r = 0; r < rows; ++r) {
          const auto row = layout.row(first_row + r);
          const index_t c = cursor[static_cast<std::size_t>(r)];
          if (c == static_cast<index_t>(row.size())) continue;
          if (kb < 0 || row[static_cast<std::size_t>(c)] < kb) kb = row[static_cast<std::size_t>(c)], listed = 0;
          if (row[static_cast<std::size_t>(c)] == kb) {
            ++listed;
            last_row_end = std::max(last_row_end, std::min(q_end, (first_row + r + 1) * b));
          }
        }
        if (kb < 0) break;
        for (index_t r = 0; r < rows; ++r) {
          const auto row = layout.row(first_row + r);
          index_t& c = cursor[static_cast<std::size_t>(r)];
          if (c < static_cast<index_t>(row.size()) && row[static_cast<std::size_t>(c)] == kb) ++c;
        }
        const index_t key_begin = kb * b;
        const index_t key_end = std::min({key_begin + b, kv_len_, spec_.causal ? last_row_end : kv_len_});
        // A block listed by every row needs no mask, unless causal cuts it for the first row.
        const bool complete = listed == rows && (!spec_.causal || key_end - 1 <= q_begin);
        const KeyRange keys{key_begin, key_end};
        tiles.add(keys, complete ? keys : KeyRange{});
      }
      tiles.finish();
    }
    /// Row i keeps the keys of its block row's listed blocks (and, causal, j <= i).
    template <class T>
    void exclude(index_t head, index_t i, const KeyTile& tile, T* scores) const {
      const BlockLayout& layout = spec_.layout_for(head);
      const index_t b = spec_.block_size;
      for (index_t kb = tile.begin / b; kb * b < tile.end; ++kb) {
        if (!layout.contains(i / b, kb)) detail::exclude_inside(KeyRange{kb * b, (kb + 1) * b}, tile, scores);
      }
      if (spec_.causal) detail::exclude_inside(KeyRange{i + 1, tile.end}, tile, scores);
    }

   private:
    Spec spec_;
    index_t kv_len_;
    index_t key_rows_;
  };

  Mask mask(const AttentionShape& shape) const {
    check_shape(shape);
    return Mask(spec_, shape.kv_len);
  }
  Plan plan(const AttentionShape& shape, const TileShape& tiles) const {
    check_shape(shape);
    return Plan(spec_, shape, tiles);
  }

  /// Pairs: per nonzero block, rows x keys of the (possibly ragged) blocks, or under causal
  /// the pairs j <= i among them in closed form. O(nonzero blocks).
  PatternCost cost(const AttentionShape& shape) const {
    check_shape(shape);
    double pairs = 0;
    const index_t b = spec_.block_size;
    const index_t heads = spec_.layouts->size() == 1 ? shape.q_heads : 1;
    for (const BlockLayout& layout : *spec_.layouts) {
      double per_layout = 0;
      for (index_t p = 0; p < layout.query_blocks(); ++p) {
        const index_t r0 = p * b, r1 = std::min(r0 + b, shape.q_len);
        for (index_t kb : layout.row(p)) {
          const index_t c0 = kb * b, c1 = std::min(c0 + b, shape.kv_len);
          per_layout += spec_.causal ? causal_pairs(r0, r1, c0, c1) : static_cast<double>((r1 - r0) * (c1 - c0));
        }
      }
      pairs += per_layout * static_cast<double>(heads);
    }
    return softmax_cost_over_heads(pairs, shape);
  }

 private:
  /// Pairs (i, j) with j <= i for rows [r0, r1) and keys [c0, c1).
  static double causal_pairs(index_t r0, index_t r1, index_t c0, index_t c1) {
    const index_t width = c1 - c0;
    double pairs = 0;
    // Rows c0 <= i < c1 see i - c0 + 1 keys; rows i >= c1 see all `width`.
    const index_t a = std::max(r0, c0), z = std::min(r1, c1);
    if (a < z) pairs += static_cast<double>(z - a) * static_cast<double>((a - c0 + 1) + (z - 1 - c0 + 1)) / 2.0;
    const index_t full_from = std::max(r0, c1);
    if (full_from < r1) pairs += static_cast<double>(r1 - full_from) * static_cast<double>(width);
    return pairs;
  }

  void check_shape(const AttentionShape& shape) const {
    const BlockLayout& layout = spec_.layouts->front();
    const index_t query_blocks = detail::ceil_div(shape.q_len, spec_.block_size);
    const index_t key_blocks = detail::ceil_div(shape.kv_len, spec_.block_size);
    if (layout.query_blocks() != query_blocks) {
      detail::reject("BlockSparse: layout query blocks", layout.query_blocks(),
                     "must equal ceil(q_len / block_size) = " + std::to_string(query_blocks));
    }
    if (layout.key_blocks() != key_blocks) {
      detail::reject("BlockSparse: layout key blocks", layout.key_blocks(),
                     "must equal ceil(kv_len / block_size) = " + std::to_string(key_blocks));
    }
    if (spec_.layouts->size() != 1 && static_cast<index_t>(spec_.layouts->size()) != shape.q_heads) {
      detail::reject("BlockSparse: layouts.size()", spec_.layouts->size(),
                     "must be 1 (shared) or q heads = " + std::to_string(shape.q_heads));
    }
  }

  Spec spec_;
};

}  // namespace attnkit
