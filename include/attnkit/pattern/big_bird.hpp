#pragma once
// attnkit::BigBird: ITC global blocks, a one-block window and r random blocks per row
// (arXiv 2007.14062; SPEC.md section 6), run as the equivalent BlockSparse.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "attnkit/core/concepts.hpp"
#include "attnkit/core/cost.hpp"
#include "attnkit/core/errors.hpp"
#include "attnkit/core/index.hpp"
#include "attnkit/core/rng.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/pattern/block_layout.hpp"
#include "attnkit/pattern/block_sparse.hpp"

namespace attnkit {

namespace detail {

/// The key blocks a given BigBird table names more than once for a query block's rows
/// (counting the window and global blocks the row attends anyway): mu = 1 + extra.
class BigBirdRepeats {
 public:
  struct Repeat {
    index_t block;
    index_t extra;  // mu - 1
  };

  /// From a table [heads][blocks - 2][r] (entries in [0, blocks)); empty() when nothing repeats.
  /// O(heads * blocks * r (r + 5)).
  BigBirdRepeats(index_t block_size, index_t blocks, index_t heads, index_t r, const std::vector<index_t>& table)
      : block_size_(block_size), blocks_(blocks), heads_(heads) {
    std::vector<std::vector<Repeat>> rows(static_cast<std::size_t>(heads * (blocks - 2)));
    bool any = false;
    for (index_t h = 0; h < heads; ++h)
      for (index_t p = 1; p < blocks - 1; ++p) {
        const auto first = table.begin() + ((h * (blocks - 2)) + (p - 1)) * r;
        std::vector<index_t> named(first, first + r);  // the row's blocks, each once below
        for (index_t kb : {index_t{0}, p - 1, p, p + 1, blocks - 1}) named.push_back(kb);
        std::sort(named.begin(), named.end());
        named.erase(std::unique(named.begin(), named.end()), named.end());
        std::vector<Repeat>& row = rows[static_cast<std::size_t>(h * (blocks - 2) + (p - 1))];
        for (index_t kb : named) {
          // The window and global blocks count once (even where they coincide: p = 1 has
          // p - 1 = 0), each table entry naming kb once more.
          const bool attended_anyway = kb == 0 || kb == blocks - 1 || (kb >= p - 1 && kb <= p + 1);
          const auto listed = static_cast<index_t>(std::count(first, first + r, kb));
          const index_t mu = (attended_anyway ? 1 : 0) + listed;
          if (mu > 1) {
            row.push_back({kb, mu - 1});
            any = true;
          }
        }
      }
    if (any) rows_ = std::make_shared<const std::vector<std::vector<Repeat>>>(std::move(rows));
  }
  BigBirdRepeats() = default;

  bool empty() const { return rows_ == nullptr; }
  index_t block_size() const { return block_size_; }

  /// The repeated blocks of query block p's rows (none for the global rows 0 and nb - 1).
  std::span<const Repeat> row(index_t head, index_t p) const {
    if (rows_ == nullptr || p <= 0 || p >= blocks_ - 1) return {};
    const index_t table_head = heads_ == 1 ? 0 : head;
    return (*rows_)[static_cast<std::size_t>(table_head * (blocks_ - 2) + (p - 1))];
  }
  /// mu - 1 for key block kb of query block p's rows.
  index_t extra(index_t head, index_t p, index_t kb) const {
    for (const Repeat& repeat : row(head, p))
      if (repeat.block == kb) return repeat.extra;
    return 0;
  }

 private:
  index_t block_size_ = 1;
  index_t blocks_ = 0;
  index_t heads_ = 1;
  std::shared_ptr<const std::vector<std::vector<Repeat>>> rows_;  // null: no repeats
};

}  // namespace detail

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
/// pattern, with HF's multiplicities: a key of block kb enters row p's softmax mu times, mu the
/// number of times the row's parts name kb (the window and global blocks once, plus each table
/// entry naming it; SPEC.md section 6). HF's eval-mode table is all zeros, so block 0 counts
/// 1 + r times in rows 1 ... nb - 2. The driver runs a repeated block once, with ln(mu) added
/// to its scores; such a pattern cannot be combined (Union, Intersection, PerHead) or decode
/// over a KV cache (both refuse it with attnkit::invalid_argument).
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
    pattern.repeats_ = detail::BigBirdRepeats(block_size, blocks, heads, pattern.random_blocks_, *pattern.table_);
    return pattern;
  }

  index_t block_size() const { return block_size_; }
  index_t random_blocks() const { return random_blocks_; }
  /// True for a pattern made by from_table.
  bool has_given_table() const { return table_ != nullptr; }
  /// True when a given table names some row's block more than once, counting the window and
  /// global blocks the row attends anyway (HF's eval-mode zeros do): keys with mu > 1.
  bool repeats_blocks() const { return !repeats_.empty(); }

  /// BlockSparse's mask with BigBird's multiplicities: mu = 1 + the block's extra count
  /// (detail::BigBirdRepeats::extra) for the attended keys of a repeated block.
  class Mask {
   public:
    Mask(detail::BigBirdRepeats repeats, BlockSparse::Mask blocks)
        : repeats_(std::move(repeats)), blocks_(std::move(blocks)) {}
    int multiplicity(index_t head, index_t i, index_t j) const {
      const int attended = blocks_.multiplicity(head, i, j);
      if (attended == 0) return 0;
      const index_t b = repeats_.block_size();
      return attended + static_cast<int>(repeats_.extra(head, i / b, j / b));
    }
    /// Sum of mu over row i's keys in `keys`.
    index_t count(index_t head, index_t i, const KeyRange& keys) const {
      index_t total = blocks_.count(head, i, keys);
      const index_t b = repeats_.block_size();
      for (const auto& repeat : repeats_.row(head, i / b)) {
        const KeyRange block{std::max(keys.begin, repeat.block * b), std::min(keys.end, (repeat.block + 1) * b)};
        if (block.begin < block.end) total += repeat.extra * blocks_.count(head, i, block);
      }
      return total;
    }
    template <class F>
    void for_each_span(index_t head, index_t i, F&& f) const {
      blocks_.for_each_span(head, i, f);
    }

   private:
    detail::BigBirdRepeats repeats_;
    BlockSparse::Mask blocks_;
  };

  /// BlockSparse's plan plus, for a table that repeats blocks, ln(mu) added to the scores of
  /// a repeated block's keys (an OptionallyBiasedPlan: without repeats the driver never asks).
  class Plan {
   public:
    static constexpr BiasScope kBiasScope = BiasScope::kEveryTile;

    Plan(detail::BigBirdRepeats repeats, BlockSparse::Plan blocks, index_t kv_len)
        : repeats_(std::move(repeats)), blocks_(std::move(blocks)), kv_len_(kv_len) {}

    template <class Visit>
    void for_each_key_tile(index_t head, index_t q_begin, index_t q_end, Visit&& visit) const {
      blocks_.for_each_key_tile(head, q_begin, q_end, visit);
    }
    template <class T>
    void exclude(index_t head, index_t i, const KeyTile& tile, T* scores) const {
      blocks_.exclude(head, i, tile, scores);
    }
    bool has_bias() const { return !repeats_.empty(); }
    /// unit * ln(mu) on the keys of row `position`'s repeated blocks inside the tile.
    template <class S>
    void add_bias(index_t head, index_t position, const KeyTile& tile, S* scores, S unit) const {
      const index_t b = repeats_.block_size();
      for (const auto& repeat : repeats_.row(head, position / b)) {
        const index_t begin = std::max(tile.begin, repeat.block * b);
        const index_t end = std::min({tile.end, (repeat.block + 1) * b, kv_len_});
        const S bias = unit * static_cast<S>(std::log(static_cast<double>(1 + repeat.extra)));
        for (index_t j = begin; j < end; ++j) scores[j - tile.begin] += bias;
      }
    }

   private:
    detail::BigBirdRepeats repeats_;
    BlockSparse::Plan blocks_;
    index_t kv_len_;
  };

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

  Mask mask(const AttentionShape& shape) const { return Mask(repeats_, block_sparse(shape).mask(shape)); }
  Plan plan(const AttentionShape& shape, const TileShape& tiles) const {
    return Plan(repeats_, block_sparse(shape).plan(shape, tiles), shape.kv_len);
  }
  /// Pairs (sum of mu) from the block rows directly (without building layouts):
  /// O(heads * blocks * r^2).
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
          for (const auto& repeat : repeats_.row(h, p))
            keys += static_cast<double>(repeat.extra) * block_keys(repeat.block);
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
  detail::BigBirdRepeats repeats_;                     // a given table's blocks with mu > 1
  index_t table_blocks_ = 0;
  index_t table_heads_ = 0;
};

}  // namespace attnkit
