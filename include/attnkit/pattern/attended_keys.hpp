#pragma once
// attnkit::attended_keys: how many keys one query row of a pattern attends.

#include <string>

#include "attnkit/core/concepts.hpp"
#include "attnkit/core/errors.hpp"
#include "attnkit/core/index.hpp"
#include "attnkit/core/shape.hpp"

namespace attnkit {

/// sum_j mu_ij for query row `row` of query head `head`: the pairs of one row, from the
/// pattern's counting mask (O(1) for windows, O(runs) for combinations). The whole call's
/// pairs and density are pattern.cost(shape).
template <MaskedPattern P>
requires CountingMask<decltype(std::declval<const P&>().mask(std::declval<const AttentionShape&>()))> index_t
attended_keys(const P& pattern, const AttentionShape& shape, index_t head, index_t row) {
  if (head < 0 || head >= shape.q_heads) {
    detail::reject("attended_keys: head", head, "must lie in [0, q_heads = " + std::to_string(shape.q_heads) + ")");
  }
  if (row < 0 || row >= shape.q_len) {
    detail::reject("attended_keys: row", row, "must lie in [0, q_len = " + std::to_string(shape.q_len) + ")");
  }
  return static_cast<index_t>(pattern.mask(shape).count(head, row, KeyRange{0, shape.kv_len}));
}

}  // namespace attnkit
