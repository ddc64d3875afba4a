// attnkit::Union (pattern algebra; SPEC.md section 4's Longformer combination): literal masks,
// identities, plan properties, counts and the kernel against the float64 reference.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "attnkit/attention.hpp"
#include "attnkit/core/rng.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/pattern/big_bird.hpp"
#include "attnkit/pattern/block_sparse.hpp"
#include "attnkit/pattern/dilated.hpp"
#include "attnkit/pattern/full.hpp"
#include "attnkit/pattern/global.hpp"
#include "attnkit/pattern/sliding_window.hpp"
#include "attnkit/pattern/union.hpp"
#include "support/long_cases.hpp"
#include "support/pattern_checks.hpp"
#include "support/test_data.hpp"

namespace attnkit::testing {
namespace {

using Rows = std::vector<std::vector<int>>;

TEST(UnionMask, LongformerWindowWithGlobalToken) {
  const Union longformer{SlidingWindow::symmetric(1), Global({0})};
  EXPECT_EQ(mask_rows(longformer, AttentionShape{1, 1, 1, 5, 5, 1, 1}),
            (Rows{{1, 1, 1, 1, 1}, {1, 1, 1, 0, 0}, {1, 1, 1, 1, 0}, {1, 0, 1, 1, 1}, {1, 0, 0, 1, 1}}));
}

TEST(UnionMask, DilatedWithGlobalToken) {
  const Union longformer{Dilated(1, 1, {2}), Global({3})};
  EXPECT_EQ(mask_rows(longformer, AttentionShape{1, 1, 1, 6, 6, 1, 1}), (Rows{{1, 0, 1, 1, 0, 0},
                                                                              {0, 1, 0, 1, 0, 0},
                                                                              {1, 0, 1, 1, 1, 0},
                                                                              {1, 1, 1, 1, 1, 1},
                                                                              {0, 0, 1, 1, 1, 0},
                                                                              {0, 0, 0, 1, 0, 1}}));
}

TEST(UnionIdentity, NoGlobalsIsTheLocalPatternAndAllGlobalsIsFull) {
  // SPEC.md section 4: g = 0 equals the local pattern; G = all equals full.
  const AttentionShape s{1, 2, 1, 150, 150, 32, 32};
  const Problem<double> p = make_problem<double>(s, InputSet::kNormal, 61);
  std::vector<index_t> all(150);
  for (index_t i = 0; i < 150; ++i) all[static_cast<std::size_t>(i)] = i;
  Tensor<double> none(1, 2, 150, 32, Layout::kBHLD), local = none, every = none, full = none;
  attention(Union{SlidingWindow::symmetric(9), Global({})}, p.q.cview(), p.k.cview(), p.v.cview(), none.view);
  attention(SlidingWindow::symmetric(9), p.q.cview(), p.k.cview(), p.v.cview(), local.view);
  attention(Union{SlidingWindow::symmetric(9), Global(all)}, p.q.cview(), p.k.cview(), p.v.cview(), every.view);
  attention(Full{}, p.q.cview(), p.k.cview(), p.v.cview(), full.view);
  EXPECT_TRUE(all_close(none, local, Tolerance{1e-13, 1e-12}));
  EXPECT_TRUE(all_close(every, full, Tolerance{1e-13, 1e-12}));
}

TEST(UnionIdentity, UnitingAPatternWithItselfChangesNothing) {
  const AttentionShape s{1, 2, 2, 260, 260, 16, 16};
  const Problem<double> p = make_problem<double>(s, InputSet::kNormal, 62);
  const BigBird big_bird(16, 2, 5);
  Tensor<double> once(1, 2, 260, 16, Layout::kBHLD), twice = once;
  attention(big_bird, p.q.cview(), p.k.cview(), p.v.cview(), once.view);
  attention(Union{big_bird, big_bird}, p.q.cview(), p.k.cview(), p.v.cview(), twice.view);
  EXPECT_TRUE(all_close(once, twice, Tolerance{1e-13, 1e-12}));
  const Union doubled{big_bird, big_bird};
  EXPECT_EQ(doubled.cost(s).attended_pairs, big_bird.cost(s).attended_pairs);
}

TEST(UnionPlan, AgreesWithMaskOverRandomParameters) {
  for (std::uint64_t trial = 0; trial < 150; ++trial) {
    const auto draw = [&](std::uint64_t stream, index_t limit) {
      return static_cast<index_t>(mix64(trial * 16 + stream) % static_cast<std::uint64_t>(limit));
    };
    const AttentionShape shape{1, 2, 1, 1 + draw(1, 250), 1 + draw(2, 250), 4, 4};
    const TileShape tiles{1 + draw(3, 64), 1 + draw(4, 130)};
    const Global globals(random_tokens(std::min(shape.q_len, shape.kv_len), draw(5, 6), trial));
    const SlidingWindow window(draw(6, 50), draw(7, 50));
    const Dilated dilated(draw(8, 20), draw(9, 20), {1 + draw(10, 6), 1 + draw(11, 6)});
    expect_plan_matches_mask(Union{window, globals}, shape, tiles);
    expect_plan_matches_mask(Union{dilated, globals}, shape, tiles);
    expect_plan_matches_mask(Union{window, SlidingWindow(draw(12, 9), draw(13, 90))}, shape, tiles);
    if (trial % 10 == 0) {
      expect_counts_match_mask(Union{window, globals}, shape);
      expect_counts_match_mask(Union{dilated, globals}, shape);
    }
  }
}

TEST(UnionCost, AttendedPairsCountTheMask) {
  const AttentionShape shape{2, 2, 1, 130, 120, 8, 8};
  const Global globals({0, 5, 6, 119});
  const Union windowed{SlidingWindow(7, 3), globals};
  const Union dilated{Dilated(4, 4, {3, 1}), globals};
  EXPECT_EQ(windowed.cost(shape).attended_pairs, count_mask_pairs(windowed, shape));
  EXPECT_EQ(dilated.cost(shape).attended_pairs, count_mask_pairs(dilated, shape));
}

TEST(UnionAttention, UnattendedNanDoesNotLeak) {
  // Key 40 is outside row 0's window and not global; its NaN value must not reach row 0.
  const AttentionShape s{1, 1, 1, 80, 80, 16, 16};
  Problem<float> p = make_problem<float>(s, InputSet::kNormal, 63);
  for (index_t d = 0; d < 16; ++d) p.v.at(0, 0, 40, d) = std::numeric_limits<float>::quiet_NaN();
  Tensor<float> out(1, 1, 80, 16, Layout::kBHLD);
  attention(Union{SlidingWindow::symmetric(4), Global({0, 41})}, p.q.cview(), p.k.cview(), p.v.cview(), out.view);
  for (index_t d = 0; d < 16; ++d) EXPECT_FALSE(std::isnan(out.at(0, 0, 1, d)));
  EXPECT_TRUE(std::isnan(out.at(0, 0, 0, 0))) << "row 0 is global and attends the NaN";
}

TEST(UnionAttention, MatchesReference) {
  for (index_t n : {index_t{1}, index_t{65}, index_t{300}, kSweepLength})
    for (index_t dim : {16, 64}) {
      SCOPED_TRACE(::testing::Message() << "n " << n << " D " << dim);
      const Global globals(random_tokens(n, 4, static_cast<std::uint64_t>(n)));
      const AttentionShape shape{1, 4, 2, n, n, dim, dim};
      const auto seed = static_cast<std::uint64_t>(n + dim);
      expect_matches_reference<float>(Union{SlidingWindow::symmetric(32), globals}, shape, InputSet::kNormal, seed);
      expect_matches_reference<double>(Union{SlidingWindow::symmetric(32), globals}, shape, InputSet::kNormal, seed);
      expect_matches_reference<float>(Union{Dilated::symmetric(16, {1, 2, 3, 3}), globals}, shape, InputSet::kNormal,
                                      seed);
      expect_matches_reference<double>(Union{Dilated::symmetric(16, {1, 2, 3, 3}), globals}, shape, InputSet::kNormal,
                                       seed);
    }
  const Union longformer{Dilated(20, 20, {1, 4}), Global({0, 150})};
  for (InputSet set : {InputSet::kPeaky, InputSet::kOffset}) {
    expect_matches_reference<float>(longformer, AttentionShape{1, 2, 1, 300, 300, 64, 64}, set, 5);
  }
  expect_matches_reference<float>(longformer, AttentionShape{2, 2, 2, 260, 200, 32, 20}, InputSet::kNormal, 6,
                                  Layout::kBLHD);
  expect_matches_reference<float>(Union{BlockSparse::cyclic_shifts(32, 8, {0, 3}), SlidingWindow::causal(10)},
                                  AttentionShape{1, 2, 2, 256, 256, 32, 32}, InputSet::kNormal, 7);
}

}  // namespace
}  // namespace attnkit::testing
