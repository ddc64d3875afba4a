#pragma once
// attnkit::ascii_view: a small text picture of any pattern's mask, for debugging.

#include <algorithm>
#include <string>

#include "attnkit/core/concepts.hpp"
#include "attnkit/core/errors.hpp"
#include "attnkit/core/index.hpp"
#include "attnkit/core/shape.hpp"

namespace attnkit {

/// One line per query row, one character per key: '#' attended, '.' not. Sequences longer
/// than `max_cells` are shown in cells of ceil(L / max_cells) positions: '#' every pair of the
/// cell attended, '+' some, '.' none. Reads the pattern's closed-form mask, so it costs
/// O(Lq Lk) predicate calls: for debugging, not for long sequences in hot paths.
template <MaskedPattern P>
std::string ascii_view(const P& pattern, const AttentionShape& shape, index_t head = 0, index_t max_cells = 64) {
  if (head < 0 || head >= shape.q_heads) {
    detail::reject("ascii_view: head", head, "must lie in [0, q_heads = " + std::to_string(shape.q_heads) + ")");
  }
  if (max_cells < 1) detail::reject("ascii_view: max_cells", max_cells, "must be >= 1");
  const auto mask = pattern.mask(shape);
  const index_t row_step = std::max<index_t>(1, detail::ceil_div(shape.q_len, max_cells));
  const index_t col_step = std::max<index_t>(1, detail::ceil_div(shape.kv_len, max_cells));
  std::string picture;
  for (index_t r0 = 0; r0 < shape.q_len; r0 += row_step) {
    for (index_t c0 = 0; c0 < shape.kv_len; c0 += col_step) {
      index_t attended = 0, cells = 0;
      for (index_t i = r0; i < std::min(r0 + row_step, shape.q_len); ++i)
        for (index_t j = c0; j < std::min(c0 + col_step, shape.kv_len); ++j, ++cells)
          attended += mask.multiplicity(head, i, j) > 0;
      picture += attended == 0 ? '.' : attended == cells ? '#' : '+';
    }
    picture += '\n';
  }
  return picture;
}

}  // namespace attnkit
