#pragma once
// attnkit::Global: Longformer's symmetric global tokens (SPEC.md section 4). Composed with a
// local pattern by attnkit::Union: Union{SlidingWindow::symmetric(w), Global({0})}.

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "attnkit/core/cost.hpp"
#include "attnkit/core/detail/score_masking.hpp"
#include "attnkit/core/errors.hpp"
#include "attnkit/core/index.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/pattern/detail/key_tile_builder.hpp"
#include "attnkit/pattern/detail/row_order.hpp"

namespace attnkit {

/// mu_ij = [i in G or j in G] for a sorted, duplicate-free token set G: a global token attends
/// every key and every query attends every global key. Union{local, Global(G)} is SPEC.md
/// section 4's combination (each key counted once); attention_with_global_inputs gives the
/// global rows their own Qg, Kg, Vg. Tokens must be < Lq and < Lk.
class Global {
 public:
  explicit Global(std::vector<index_t> tokens)
      : tokens_(std::make_shared<const std::vector<index_t>>(std::move(tokens))) {
    const auto& g = *tokens_;
    for (std::size_t e = 0; e < g.size(); ++e) {
      if (g[e] < 0) detail::reject("Global: tokens[" + std::to_string(e) + "]", g[e], "must be >= 0");
      if (e > 0 && g[e] <= g[e - 1]) {
        detail::reject("Global: tokens[" + std::to_string(e) + "]", g[e],
                       "tokens must be strictly increasing (sorted, no duplicates)");
      }
    }
  }

  const std::vector<index_t>& tokens() const { return *tokens_; }
  /// The tokens, as every pattern holding global tokens reports them (WithGlobalTokens).
  const std::vector<index_t>& global_tokens() const { return *tokens_; }

  class Mask {
   public:
    Mask(std::shared_ptr<const std::vector<index_t>> tokens, index_t kv_len)
        : tokens_(std::move(tokens)), kv_len_(kv_len) {}
    int multiplicity(index_t /*head*/, index_t i, index_t j) const {
      return is_listed(*tokens_, i) || is_listed(*tokens_, j) ? 1 : 0;
    }
    /// Attended keys of row i among [keys.begin, keys.end): O(log g).
    index_t count(index_t /*head*/, index_t i, const KeyRange& keys) const {
      if (keys.begin >= keys.end) return 0;
      if (is_listed(*tokens_, i)) return keys.end - keys.begin;
      return std::lower_bound(tokens_->begin(), tokens_->end(), keys.end) -
             std::lower_bound(tokens_->begin(), tokens_->end(), keys.begin);
    }
    /// Calls f(KeyRange) for the attended runs of row i: all keys for a global row, else one
    /// run per global key.
    template <class F>
    void for_each_span(index_t /*head*/, index_t i, F&& f) const {
      if (is_listed(*tokens_, i)) {
        f(KeyRange{0, kv_len_});
        return;
      }
      for (index_t token : *tokens_) f(KeyRange{token, token + 1});
    }

   private:
    std::shared_ptr<const std::vector<index_t>> tokens_;
    index_t kv_len_;
  };

  /// In the coordinates of a RowOrder (the identity, or the order of a reordering pattern
  /// Global is united with), the global tokens sit at sorted positions per head. A query tile
  /// holding a global position visits every key tile; otherwise only the tiles holding global
  /// keys, each cut to the span of its global keys and masked unless that span is all global.
  /// O(log g) to locate a tile's tokens.
  class Plan {
   public:
    /// positions[head or 0]: the sorted query and key positions of the tokens.
    struct Positions {
      std::vector<std::vector<index_t>> queries, keys;
    };
    Plan(std::shared_ptr<const Positions> positions, index_t kv_len, index_t key_rows)
        : positions_(std::move(positions)), kv_len_(kv_len), key_rows_(key_rows) {}

    template <class Visit>
    void for_each_key_tile(index_t head, index_t q_begin, index_t q_end, Visit&& visit) const {
      const auto& rows = query_positions(head);
      const auto first_row = std::lower_bound(rows.begin(), rows.end(), q_begin);
      const index_t global_rows = std::lower_bound(first_row, rows.end(), q_end) - first_row;
      detail::KeyTileBuilder tiles(key_rows_, visit);
      if (global_rows > 0) {  // some row attends everything
        const KeyRange all{0, kv_len_};
        tiles.add(all, global_rows == q_end - q_begin ? all : KeyRange{});
      } else {
        const auto& keys = key_positions(head);
        for (auto it = keys.begin(); it != keys.end();) {
          const index_t tile_end = (*it / key_rows_ + 1) * key_rows_;
          const auto last = std::lower_bound(it, keys.end(), tile_end) - 1;
          const index_t begin = *it, end = *last + 1;
          const bool all_global = end - begin == (last - it) + 1;
          tiles.add_piece(KeyTile{begin, end, !all_global});
          it = last + 1;
        }
      }
      tiles.finish();
    }
    /// Runs of [q_begin, q_end) that are all global rows or all other rows: a global row
    /// attends every key, the others only the global keys (and, in a union, their band).
    template <class F>
    void for_each_row_run(index_t head, index_t q_begin, index_t q_end, F&& f) const {
      const auto& rows = query_positions(head);
      index_t begin = q_begin;  // start of the run not yet reported
      for (auto it = std::lower_bound(rows.begin(), rows.end(), q_begin); it != rows.end() && *it < q_end;) {
        auto last = it;  // [*it, *last] consecutive global positions
        while (last + 1 != rows.end() && *(last + 1) == *last + 1 && *(last + 1) < q_end) ++last;
        if (begin < *it) f(KeyRange{begin, *it});
        f(KeyRange{*it, *last + 1});
        begin = *last + 1;
        it = last + 1;
      }
      if (begin < q_end) f(KeyRange{begin, q_end});
    }
    /// Every key for a global row, else the span of the global keys (ReachBoundedPlan).
    KeyRange key_reach(index_t head, index_t position) const {
      if (is_listed(query_positions(head), position)) return KeyRange{0, kv_len_};
      const auto& keys = key_positions(head);
      return keys.empty() ? KeyRange{} : KeyRange{keys.front(), keys.back() + 1};
    }
    template <class T>
    void exclude(index_t head, index_t position, const KeyTile& tile, T* scores) const {
      if (is_listed(query_positions(head), position)) return;
      const auto& keys = key_positions(head);
      detail::exclude_all_but(keys.begin(), keys.end(), tile, scores);
    }

   private:
    const std::vector<index_t>& query_positions(index_t head) const { return per_head(positions_->queries, head); }
    const std::vector<index_t>& key_positions(index_t head) const { return per_head(positions_->keys, head); }
    static const std::vector<index_t>& per_head(const std::vector<std::vector<index_t>>& lists, index_t head) {
      return lists[static_cast<std::size_t>(table_of_head(static_cast<index_t>(lists.size()), head))];
    }

    std::shared_ptr<const Positions> positions_;
    index_t kv_len_;
    index_t key_rows_;
  };

  Mask mask(const AttentionShape& shape) const {
    check_shape(shape);
    return Mask(tokens_, shape.kv_len);
  }
  Plan plan(const AttentionShape& shape, const TileShape& tiles) const {
    return plan(shape, tiles, detail::IdentityOrder{});
  }
  /// The plan in the coordinates of `order` (see RowOrder): O(H g log g) for a reordering
  /// order, O(g) for the identity.
  template <RowOrder Order>
  Plan plan(const AttentionShape& shape, const TileShape& tiles, const Order& order) const {
    check_shape(shape);
    auto positions = std::make_shared<Plan::Positions>();
    const index_t heads = Order::kReorders ? shape.q_heads : 1;
    for (index_t h = 0; h < heads; ++h) {
      std::vector<index_t> queries, keys;
      for (index_t token : *tokens_) {
        queries.push_back(order.query_position(h, token));
        keys.push_back(order.key_position(h, token));
      }
      std::sort(queries.begin(), queries.end());
      std::sort(keys.begin(), keys.end());
      positions->queries.push_back(std::move(queries));
      positions->keys.push_back(std::move(keys));
    }
    return Plan(std::move(positions), shape.kv_len, tiles.key_rows);
  }
  /// Pairs per head: g rows of Lk keys plus (Lq - g) rows of g keys.
  PatternCost cost(const AttentionShape& shape) const {
    check_shape(shape);
    const double g = static_cast<double>(tokens_->size());
    return softmax_cost(g * static_cast<double>(shape.kv_len) + (static_cast<double>(shape.q_len) - g) * g, shape);
  }

 private:
  /// Whether `position` is in the sorted list: O(log g).
  static bool is_listed(const std::vector<index_t>& sorted, index_t position) {
    return std::binary_search(sorted.begin(), sorted.end(), position);
  }

  void check_shape(const AttentionShape& shape) const {
    if (!tokens_->empty() && tokens_->back() >= std::min(shape.q_len, shape.kv_len)) {
      detail::reject(
          "Global: tokens.back()", tokens_->back(),
          "global tokens must be < min(q_len, kv_len) = " + std::to_string(std::min(shape.q_len, shape.kv_len)));
    }
  }

  std::shared_ptr<const std::vector<index_t>> tokens_;
};

}  // namespace attnkit
