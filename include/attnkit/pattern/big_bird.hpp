#pragma once
// attnkit::BigBird: ITC global blocks, a one-block window and r random blocks per row
// (arXiv 2007.14062; SPEC.md section 6), run as the equivalent BlockSparse.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "attnkit/core/cost.hpp"
#include "attnkit/core/errors.hpp"
#include "attnkit/core/index.hpp"
#include "attnkit/core/rng.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/pattern/block_layout.hpp"
#include "attnkit/pattern/block_sparse.hpp"

namespace attnkit {

/// Blocks of b tokens, nb = ceil(n / b). Query blocks 0 and nb - 1 attend every key block;
/// every other block p attends A(p) = {0, nb - 1} U {p - 1, p, p + 1} U R_h[p], where R_h[p]
/// holds min(r, |C_p|) distinct blocks drawn uniformly from the candidates
/// C_p = [0, nb) \ ({p - 1, p, p + 1} U {0, nb - 1}) by a partial Fisher-Yates shuffle on the
/// counter-based generator keyed by (seed, layer, head, p): the same table for any thread
/// count, call order or batch. Self-attention only (Lq = Lk). HF's quirks (eval mode
/// zeroing the table, drawing only from the first 1024 tokens, falling back to full attention
/// for short inputs) are not reproduced by the drawn table.
/// from_table(block_size, blocks, heads, table) takes R_h[p] as given instead: HF's rand_attn
/// ([heads][blocks - 2][r], the rows of blocks 1 ... nb - 2), for a checkpoint's exact
/// pattern. A given entry naming a block the row attends anyway (its window, block 0 or
/// nb - 1; HF's eval-mode table is all zeros) adds nothing: attnkit's patterns are 0/1 masks, a
/// key enters a row's softmax once however many parts of the pattern name it (SPEC.md
/// section 6), where HF gathers such a key again and weights it twice.
class BigBird {
 public:
  explicit BigBird(index_t block_size = 64, index_t random_blocks = 3, std::uint64_t seed = 0, std::uint64_t layer = 0)
      : block_size_(block_size), random_blocks_(random_blocks), seed_(seed), layer_(layer) {
    if (block_size <= 0) detail::reject("BigBird: block_size", block_size, "must be >= 1");
    if (random_blocks < 0) detail::reject("BigBird: random_blocks", random_blocks, "must be >= 0");
  }

  /// BigBird over sequences of exactly `blocks` blocks whose random blocks are given: `table`
  /// row-major [heads][blocks - 2][r] (heads 1: shared by every query head), entry (h, p - 1, t)
  /// a key block of query block p, in [0, blocks). Throws attnkit::invalid_argument for another
  /// size or an entry out of range; a call whose block count or heads differ is refused.
  static BigBird from_table(index_t block_size, index_t blocks, index_t heads, std::vector<index_t> table) {
    if (blocks < 3)
      detail::reject("BigBird::from_table: blocks", blocks, "must be >= 3 (a table holds blocks - 2 rows)");
    if (heads < 1) detail::reject("BigBird::from_table: heads", heads, "must be >= 1");
    const auto size = static_cast<index_t>(table.size());
    if (size % (heads * (blocks - 2)) != 0) {
      detail::reject("BigBird::from_table: table.size()", size,
                     "must be heads * (blocks - 2) * r = " + std::to_string(heads * (blocks - 2)) + " * r");
    }
    for (index_t entry : table) {
      if (entry < 0 || entry >= blocks) {
        detail::reject("BigBird::from_table: table entry", entry,
                       "must lie in [0, blocks = " + std::to_string(blocks) + ")");
      }
    }
    BigBird pattern(block_size, size / (heads * (blocks - 2)));
    pattern.table_ = std::make_shared<const std::vector<index_t>>(std::move(table));
    pattern.table_blocks_ = blocks;
    pattern.table_heads_ = heads;
    return pattern;
  }

  index_t block_size() const { return block_size_; }
  index_t random_blocks() const { return random_blocks_; }
  /// True for a pattern made by from_table.
  bool has_given_table() const { return table_ != nullptr; }

  /// R_h[p] for one head and query block of a sequence of `blocks` blocks: sorted, at most r
  /// entries (fewer when the row has fewer candidates); empty for the global rows 0, nb - 1.
  std::vector<index_t> random_row(index_t head, index_t p, index_t blocks) const {
    if (p == 0 || p == blocks - 1) return {};
    if (table_ != nullptr) return given_row(head, p, blocks);
    // C_p in increasing order is [1, nb - 1) without the window [lo, hi]; candidate(k) is its
    // k-th element, so the shuffle touches O(r) entries instead of materialising C_p.
    const index_t lo = std::max<index_t>(p - 1, 1), hi = std::min(p + 1, blocks - 2);
    const index_t count = (blocks - 2) - (hi - lo + 1);
    const auto candidate = [&](index_t k) { return 1 + k < lo ? 1 + k : 1 + k + (hi - lo + 1); };
    // Partial Fisher-Yates over the virtual array: `moved` holds the positions swapped so far.
    std::vector<std::pair<index_t, index_t>> moved;  // (position, value now stored there)
    const auto value_at = [&](index_t position) {
      for (const auto& [where, value] : moved)
        if (where == position) return value;
      return candidate(position);
    };
    const auto store = [&](index_t position, index_t value) {
      for (auto& entry : moved)
        if (entry.first == position) {
          entry.second = value;
          return;
        }
      moved.emplace_back(position, value);
    };
    const index_t draws = std::min(random_blocks_, count);
    std::vector<index_t> row;
    for (index_t t = 0; t < draws; ++t) {
      const std::uint64_t bits = counter_random(seed_, layer_, static_cast<std::uint64_t>(head),
                                                static_cast<std::uint64_t>(p), static_cast<std::uint64_t>(t));
      const index_t pick = t + uniform_below(bits, count - t);
      const index_t chosen = value_at(pick);
      store(pick, value_at(t));
      row.push_back(chosen);
    }
    std::sort(row.begin(), row.end());
    return row;
  }

  /// The inspectable table [heads x blocks x r], row-major, -1 for missing entries.
  std::vector<index_t> random_table(index_t heads, index_t blocks) const {
    std::vector<index_t> table(static_cast<std::size_t>(heads * blocks * random_blocks_), -1);
    for (index_t h = 0; h < heads; ++h)
      for (index_t p = 0; p < blocks; ++p) {
        const std::vector<index_t> row = random_row(h, p, blocks);
        std::copy(row.begin(), row.end(), table.begin() + (h * blocks + p) * random_blocks_);
      }
    return table;
  }

  /// The BlockSparse pattern with one layout per query head that this pattern is for `shape`.
  /// O(heads * blocks * (5 + r)) time and memory.
  BlockSparse block_sparse(const AttentionShape& shape) const {
    require_self_attention(shape);
    require_table_fits(shape);
    const index_t blocks = detail::ceil_div(shape.kv_len, block_size_);
    std::vector<BlockLayout> layouts;
    for (index_t h = 0; h < std::max<index_t>(shape.q_heads, 1); ++h) {
      std::vector<std::vector<index_t>> rows(static_cast<std::size_t>(blocks));
      for (index_t p = 0; p < blocks; ++p) {
        std::vector<index_t>& row = rows[static_cast<std::size_t>(p)];
        if (p == 0 || p == blocks - 1) {
          for (index_t kb = 0; kb < blocks; ++kb) row.push_back(kb);
          continue;
        }
        row = random_row(h, p, blocks);
        for (index_t kb : {index_t{0}, p - 1, p, p + 1, blocks - 1}) row.push_back(kb);
        std::sort(row.begin(), row.end());
        row.erase(std::unique(row.begin(), row.end()), row.end());
      }
      layouts.push_back(BlockLayout::from_rows(blocks, rows));
    }
    return BlockSparse(block_size_, std::move(layouts));
  }

  auto mask(const AttentionShape& shape) const { return block_sparse(shape).mask(shape); }
  auto plan(const AttentionShape& shape, const TileShape& tiles) const {
    return block_sparse(shape).plan(shape, tiles);
  }
  /// Pairs from the block rows directly (without building layouts): O(heads * blocks * r^2).
  PatternCost cost(const AttentionShape& shape) const {
    require_self_attention(shape);
    require_table_fits(shape);
    const index_t n = shape.kv_len, blocks = detail::ceil_div(n, block_size_);
    const auto block_keys = [&](index_t kb) {
      return static_cast<double>(std::min(block_size_, n - kb * block_size_));
    };
    double pairs = 0;
    for (index_t h = 0; h < shape.q_heads; ++h)
      for (index_t p = 0; p < blocks; ++p) {
        double keys = 0;
        if (p == 0 || p == blocks - 1) {
          keys = static_cast<double>(n);
        } else {
          for (index_t kb : random_row(h, p, blocks)) keys += block_keys(kb);
          for (index_t kb = std::max<index_t>(p - 1, 1); kb <= std::min(p + 1, blocks - 2); ++kb)
            keys += block_keys(kb);
          keys += block_keys(0) + (blocks - 1 > 0 ? block_keys(blocks - 1) : 0);
        }
        pairs += keys * block_keys(p);
      }
    return softmax_cost_over_heads(pairs, shape);
  }

 private:
  /// A given table's row for (head, p): its blocks outside the window and the global blocks,
  /// sorted, each once (the row attends the others anyway).
  std::vector<index_t> given_row(index_t head, index_t p, index_t blocks) const {
    if (blocks != table_blocks_) {
      detail::reject("BigBird: blocks", blocks,
                     "must equal the given table's blocks = " + std::to_string(table_blocks_));
    }
    if (table_heads_ != 1 && (head < 0 || head >= table_heads_)) {
      detail::reject("BigBird: head", head,
                     "must lie in [0, the given table's heads = " + std::to_string(table_heads_) + ")");
    }
    const index_t table_head = table_heads_ == 1 ? 0 : head;
    const auto first = table_->begin() + ((table_head * (blocks - 2)) + (p - 1)) * random_blocks_;
    std::vector<index_t> row;
    for (auto it = first; it != first + random_blocks_; ++it) {
      if (*it != 0 && *it != blocks - 1 && (*it < p - 1 || *it > p + 1)) row.push_back(*it);
    }
    std::sort(row.begin(), row.end());
    row.erase(std::unique(row.begin(), row.end()), row.end());
    return row;
  }

  void require_table_fits(const AttentionShape& shape) const {
    if (table_ == nullptr) return;
    const index_t blocks = detail::ceil_div(shape.kv_len, block_size_);
    if (blocks != table_blocks_) {
      detail::reject(
          "BigBird: blocks of the call", blocks,
          "must equal the given table's blocks = " + std::to_string(table_blocks_) + " (ceil(n / block_size))");
    }
    if (table_heads_ != 1 && table_heads_ != shape.q_heads) {
      detail::reject("BigBird: q heads", shape.q_heads,
                     "must equal the given table's heads = " + std::to_string(table_heads_) + " (or the table 1)");
    }
  }

  static void require_self_attention(const AttentionShape& shape) {
    if (shape.q_len != shape.kv_len) {
      detail::reject("BigBird: q_len", shape.q_len,
                     "must equal kv_len = " + std::to_string(shape.kv_len) + " (a self-attention pattern)");
    }
  }

  index_t block_size_;
  index_t random_blocks_;
  std::uint64_t seed_;
  std::uint64_t layer_;
  std::shared_ptr<const std::vector<index_t>> table_;  // from_table's R, else drawn
  index_t table_blocks_ = 0;
  index_t table_heads_ = 0;
};

}  // namespace attnkit
