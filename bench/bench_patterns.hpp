#pragma once
// The sparse patterns the benchmark and the memory probe measure, by name.

#include <stdexcept>
#include <string>
#include <vector>

#include "attnkit/attnkit.hpp"

namespace attnkit::bench {

/// Block-sparse benchmark layout, O(n) pairs: query block p attends key blocks p - 2 ... p + 2
/// and block 0.
inline BlockSparse banded_block_layout(index_t n, index_t block) {
  const index_t blocks = detail::ceil_div(n, block);
  std::vector<std::vector<index_t>> rows(static_cast<std::size_t>(blocks));
  for (index_t p = 0; p < blocks; ++p) {
    auto& row = rows[static_cast<std::size_t>(p)];
    if (p > 2) row.push_back(0);
    for (index_t kb = std::max<index_t>(0, p - 2); kb <= std::min(blocks - 1, p + 2); ++kb) row.push_back(kb);
  }
  return BlockSparse(block, {BlockLayout::from_rows(blocks, rows)});
}

/// Calls f(pattern) with the sparse pattern `name` for sequence length n (8 query heads):
///   window_r256            SlidingWindow::symmetric(256)
///   dilated_r256_d4        Dilated::symmetric(256, {4}): the same pairs as the window, spread
///   longformer_r256_global1  Union{Dilated::symmetric(256, dilations 1,1,2,2,3,3,4,4), Global({0})}
///   block64_band5_global1  banded_block_layout(n, 64)
///   bigbird_b64_r3         BigBird(64, 3, seed 2024)
template <class F>
void with_sparse_pattern(const std::string& name, index_t n, F&& f) {
  if (name == "window_r256") return f(SlidingWindow::symmetric(256));
  if (name == "dilated_r256_d4") return f(Dilated::symmetric(256, {4}));
  if (name == "longformer_r256_global1")
    return f(Union{Dilated::symmetric(256, {1, 1, 2, 2, 3, 3, 4, 4}), Global({0})});
  if (name == "block64_band5_global1") return f(banded_block_layout(n, 64));
  if (name == "bigbird_b64_r3") return f(BigBird(64, 3, 2024));
  throw std::invalid_argument("unknown sparse pattern name: " + name);
}

inline const std::vector<std::string>& sparse_pattern_names() {
  static const std::vector<std::string> names{"window_r256", "dilated_r256_d4", "longformer_r256_global1",
                                              "block64_band5_global1", "bigbird_b64_r3"};
  return names;
}

}  // namespace attnkit::bench
