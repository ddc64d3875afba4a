#pragma once
// attnkit::GlobalTokens: Longformer's symmetric global attention on its own (SPEC.md section 4);
// Longformer is attnkit::Union of a local pattern and GlobalTokens.

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "attnkit/core/cost.hpp"
#include "attnkit/core/errors.hpp"
#include "attnkit/core/index.hpp"
#include "attnkit/core/shape.hpp"

namespace attnkit {

/// mu_ij = [i in G or j in G] for a sorted, duplicate-free token set G: a global token attends
/// every key and every query attends every global key. Union(local, GlobalTokens(G)) gives
/// SPEC.md section 4's combination (each key counted once). Tokens must be < Lq and < Lk.
class GlobalTokens {
 public:
  explicit GlobalTokens(std::vector<index_t> tokens) : tokens_(std::make_shared<const std::vector<index_t>>(std::move(tokens))) {
    const auto& g = *tokens_;
    for (std::size_t e = 0; e < g.size(); ++e) {
      if (g[e] < 0) detail::reject("GlobalTokens: tokens[" + std::to_string(e) + "]", g[e], "must be >= 0");
      if (e > 0 && g[e] <= g[e - 1]) {
        detail::reject("GlobalTokens: tokens[" + std::to_string(e) + "]", g[e],
                       "tokens must be strictly increasing (sorted, no duplicates)");
      }
    }
  }

  const std::vector<index_t>& tokens() const { return *tokens_; }

  class Mask {
   public:
    explicit Mask(std::shared_ptr<const std::vector<index_t>> tokens) : tokens_(std::move(tokens)) {}
    int multiplicity(index_t /*head*/, index_t i, index_t j) const {
      return is_global(*tokens_, i) || is_global(*tokens_, j) ? 1 : 0;
    }

   private:
    std::shared_ptr<const std::vector<index_t>> tokens_;
  };

  /// A query tile holding a global row visits every key tile; otherwise only the tiles holding
  /// global keys, each cut to the span of its global keys and masked unless that span is all
  /// global. O(log g) to locate a tile's tokens.
  class Plan {
   public:
    Plan(std::shared_ptr<const std::vector<index_t>> tokens, index_t kv_len, index_t key_rows)
        : tokens_(std::move(tokens)), kv_len_(kv_len), key_rows_(key_rows) {}

    template <class Visit>
    void for_each_key_tile(index_t /*head*/, index_t q_begin, index_t q_end, Visit&& visit) const {
      const auto& g = *tokens_;
      const auto first_row = std::lower_bound(g.begin(), g.end(), q_begin);
      const index_t global_rows = std::lower_bound(first_row, g.end(), q_end) - first_row;
      if (global_rows > 0) {  // some row attends everything
        for (index_t begin = 0; begin < kv_len_; begin += key_rows_)
          visit(KeyTile{begin, std::min(begin + key_rows_, kv_len_), global_rows != q_end - q_begin});
        return;
      }
      for (auto it = g.begin(); it != g.end() && *it < kv_len_;) {
        const index_t tile = *it / key_rows_;
        const auto last = std::lower_bound(it, g.end(), std::min((tile + 1) * key_rows_, kv_len_)) - 1;
        const index_t begin = *it, end = *last + 1;
        visit(KeyTile{begin, end, end - begin != (last - it) + 1});  // masked unless the span is all global
        it = last + 1;
      }
    }
    bool allows(index_t /*head*/, index_t i, index_t j) const { return is_global(*tokens_, i) || is_global(*tokens_, j); }

   private:
    std::shared_ptr<const std::vector<index_t>> tokens_;
    index_t kv_len_;
    index_t key_rows_;
  };

  Mask mask(const AttentionShape& shape) const {
    check_shape(shape);
    return Mask(tokens_);
  }
  Plan plan(const AttentionShape& shape, const TileShape& tiles) const {
    check_shape(shape);
    return Plan(tokens_, shape.kv_len, tiles.key_rows);
  }
  /// Pairs per head: g rows of Lk keys plus (Lq - g) rows of g keys.
  PatternCost cost(const AttentionShape& shape) const {
    check_shape(shape);
    const double g = static_cast<double>(tokens_->size());
    return softmax_cost(g * static_cast<double>(shape.kv_len) + (static_cast<double>(shape.q_len) - g) * g, shape);
  }

 private:
  /// Whether `position` is one of the sorted tokens: O(log g).
  static bool is_global(const std::vector<index_t>& tokens, index_t position) {
    return std::binary_search(tokens.begin(), tokens.end(), position);
  }

  void check_shape(const AttentionShape& shape) const {
    if (!tokens_->empty() && tokens_->back() >= std::min(shape.q_len, shape.kv_len)) {
      detail::reject("GlobalTokens: tokens.back()", tokens_->back(),
                     "global tokens must be < min(q_len, kv_len) = " + std::to_string(std::min(shape.q_len, shape.kv_len)));
    }
  }

  std::shared_ptr<const std::vector<index_t>> tokens_;
};

}  // namespace attnkit
