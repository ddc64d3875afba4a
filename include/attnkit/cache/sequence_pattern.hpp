#pragma once
// attnkit::sequence_prefix: the pattern a sequence of n tokens follows when it is decoded from
// a KV cache (SPEC.md section 13). A pattern describes a whole sequence; a cache holds a
// prefix of it that grows by a few tokens per step, so parts of the pattern that lie beyond
// the tokens held so far (a global token not yet generated, layout blocks planned for the
// capacity) are dropped rather than rejected.

#include <algorithm>
#include <variant>
#include <vector>

#include "attnkit/core/index.hpp"
#include "attnkit/pattern/block_layout.hpp"
#include "attnkit/pattern/block_sparse.hpp"
#include "attnkit/pattern/global.hpp"
#include "attnkit/pattern/intersection.hpp"
#include "attnkit/pattern/per_head.hpp"
#include "attnkit/pattern/union.hpp"

namespace attnkit {

/// Any other kind: itself (its parameters do not depend on the sequence length, or, like
/// BigBird's, are defined by it).
template <class P>
P sequence_prefix(const P& pattern, index_t /*tokens*/) {
  return pattern;
}

/// Global tokens below n (the later ones are not generated yet).
inline Global sequence_prefix(const Global& pattern, index_t tokens) {
  const std::vector<index_t>& all = pattern.tokens();
  return Global(std::vector<index_t>(all.begin(), std::lower_bound(all.begin(), all.end(), tokens)));
}

/// Layouts with more blocks than ceil(n / b) (planned for the cache's capacity) cut to that
/// many; layouts with fewer are left for BlockSparse's own check to reject. O(nonzeros).
inline BlockSparse sequence_prefix(const BlockSparse& pattern, index_t tokens) {
  const index_t blocks = detail::ceil_div(tokens, pattern.block_size());
  const BlockLayout& first = pattern.layouts().front();
  if (first.query_blocks() <= blocks && first.key_blocks() <= blocks) return pattern;
  std::vector<BlockLayout> layouts;
  for (const BlockLayout& layout : pattern.layouts()) {
    std::vector<std::vector<index_t>> rows(static_cast<std::size_t>(std::min(blocks, layout.query_blocks())));
    for (index_t p = 0; p < static_cast<index_t>(rows.size()); ++p) {
      for (index_t kb : layout.row(p))
        if (kb < blocks) rows[static_cast<std::size_t>(p)].push_back(kb);
    }
    layouts.push_back(BlockLayout::from_rows(std::min(blocks, layout.key_blocks()), rows));
  }
  return BlockSparse(pattern.block_size(), std::move(layouts), pattern.causal());
}

template <MaskedPattern First, MaskedPattern Second>
Union<First, Second> sequence_prefix(const Union<First, Second>& pattern, index_t tokens);
template <MaskedPattern First, MaskedPattern Second>
Intersection<First, Second> sequence_prefix(const Intersection<First, Second>& pattern, index_t tokens);
template <MaskedPattern... Ps>
PerHead<Ps...> sequence_prefix(const PerHead<Ps...>& pattern, index_t tokens);

/// Combinations: their parts' prefixes.
template <MaskedPattern First, MaskedPattern Second>
Union<First, Second> sequence_prefix(const Union<First, Second>& pattern, index_t tokens) {
  return Union<First, Second>{sequence_prefix(pattern.first, tokens), sequence_prefix(pattern.second, tokens)};
}
template <MaskedPattern First, MaskedPattern Second>
Intersection<First, Second> sequence_prefix(const Intersection<First, Second>& pattern, index_t tokens) {
  return Intersection<First, Second>{sequence_prefix(pattern.first, tokens), sequence_prefix(pattern.second, tokens)};
}
template <MaskedPattern... Ps>
PerHead<Ps...> sequence_prefix(const PerHead<Ps...>& pattern, index_t tokens) {
  std::vector<typename PerHead<Ps...>::Choice> heads;
  for (const auto& choice : pattern.patterns()) {
    heads.push_back(std::visit(
        [&](const auto& held) { return typename PerHead<Ps...>::Choice(sequence_prefix(held, tokens)); }, choice));
  }
  return PerHead<Ps...>(std::move(heads));
}

}  // namespace attnkit
