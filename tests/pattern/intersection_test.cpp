// attnkit::Intersection (pattern algebra): literal masks, identities, plan properties, counts
// and the kernel against the float64 reference.

#include <gtest/gtest.h>

#include <vector>

#include "attnkit/attention.hpp"
#include "attnkit/core/rng.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/pattern/block_sparse.hpp"
#include "attnkit/pattern/dilated.hpp"
#include "attnkit/pattern/full.hpp"
#include "attnkit/pattern/global.hpp"
#include "attnkit/pattern/intersection.hpp"
#include "attnkit/pattern/sliding_window.hpp"
#include "support/pattern_checks.hpp"
#include "support/test_data.hpp"

namespace attnkit::testing {
namespace {

using Rows = std::vector<std::vector<int>>;

TEST(IntersectionMask, WindowMadeCausal) {
  EXPECT_EQ(
      mask_rows(Intersection{SlidingWindow::symmetric(1), Full{.causal = true}}, AttentionShape{1, 1, 1, 4, 4, 1, 1}),
      (Rows{{1, 0, 0, 0}, {1, 1, 0, 0}, {0, 1, 1, 0}, {0, 0, 1, 1}}));
}

TEST(IntersectionIdentity, CausalBlockSparseIsTheCausalLayout) {
  // The same attended set as BlockSparse's own causal flag: identical masks and outputs.
  const AttentionShape s{1, 2, 2, 256, 256, 32, 32};
  const BlockSparse layout = BlockSparse::cyclic_shifts(32, 8, {0, 3});
  const BlockSparse causal_layout(32, layout.layouts(), true);
  const Intersection combined{layout, Full{.causal = true}};
  EXPECT_EQ(mask_rows(combined, s, 1), mask_rows(causal_layout, s, 1));
  EXPECT_EQ(combined.cost(s).attended_pairs, causal_layout.cost(s).attended_pairs);
  const Problem<double> p = make_problem<double>(s, InputSet::kNormal, 71);
  Tensor<double> a(1, 2, 256, 32, Layout::kBHLD), b = a;
  attention(combined, p.q.cview(), p.k.cview(), p.v.cview(), a.view);
  attention(causal_layout, p.q.cview(), p.k.cview(), p.v.cview(), b.view);
  EXPECT_TRUE(all_close(a, b, Tolerance{1e-13, 1e-12}));
}

TEST(IntersectionPlan, AgreesWithMaskOverRandomParameters) {
  for (std::uint64_t trial = 0; trial < 150; ++trial) {
    const auto draw = [&](std::uint64_t stream, index_t limit) {
      return static_cast<index_t>(mix64(trial * 16 + stream) % static_cast<std::uint64_t>(limit));
    };
    const AttentionShape shape{1, 2, 1, 1 + draw(1, 250), 1 + draw(2, 250), 4, 4};
    const TileShape tiles{1 + draw(3, 64), 1 + draw(4, 130)};
    const SlidingWindow window(draw(6, 50), draw(7, 50));
    const Global globals(random_tokens(std::min(shape.q_len, shape.kv_len), draw(5, 6), trial));
    // Overlapping tiles of the operands may hold no common pair: empty tiles are allowed.
    expect_plan_matches_mask(Intersection{window, Full{.causal = draw(8, 2) == 0}}, shape, tiles, EmptyTiles::kAllowed);
    expect_plan_matches_mask(Intersection{Dilated(draw(9, 30), draw(10, 30), {1 + draw(11, 5), 2}), globals}, shape,
                             tiles, EmptyTiles::kAllowed);
    if (trial % 10 == 0) expect_counts_match_mask(Intersection{window, Full{.causal = true}}, shape);
  }
}

TEST(IntersectionAttention, MatchesReference) {
  for (index_t n : {1, 65, 300})
    for (index_t dim : {16, 64}) {
      SCOPED_TRACE(::testing::Message() << "n " << n << " D " << dim);
      const AttentionShape shape{1, 2, 1, n, n, dim, dim};
      const auto seed = static_cast<std::uint64_t>(n + dim);
      expect_matches_reference<float>(Intersection{SlidingWindow(40, 40), Full{.causal = true}}, shape,
                                      InputSet::kNormal, seed);
      expect_matches_reference<double>(Intersection{SlidingWindow(40, 40), SlidingWindow(2, 90)}, shape,
                                       InputSet::kNormal, seed);
    }
}

}  // namespace
}  // namespace attnkit::testing
