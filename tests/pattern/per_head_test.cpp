// attnkit::PerHead (pattern algebra): per-head masks, identities, plan properties, counts,
// bad input and the kernel against the float64 reference.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "attnkit/attention.hpp"
#include "attnkit/core/errors.hpp"
#include "attnkit/core/rng.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/pattern/full.hpp"
#include "attnkit/pattern/global.hpp"
#include "attnkit/pattern/per_head.hpp"
#include "attnkit/pattern/sliding_window.hpp"
#include "support/pattern_checks.hpp"
#include "support/test_data.hpp"

namespace attnkit::testing {
namespace {

using Mixed = PerHead<Full, SlidingWindow, Global>;

TEST(PerHeadMask, EachHeadFollowsItsPattern) {
  const Mixed pattern({Full{.causal = true}, SlidingWindow::symmetric(1), Global({2})});
  const AttentionShape shape{1, 3, 1, 4, 4, 1, 1};
  for (index_t h = 0; h < 3; ++h) {
    const AttentionShape one_head{1, 3, 1, 4, 4, 1, 1};
    const auto expected = std::visit([&](const auto& p) { return mask_rows(p, one_head, h); }, pattern.patterns()[h]);
    EXPECT_EQ(mask_rows(pattern, shape, h), expected) << "head " << h;
  }
}

TEST(PerHeadErrors, PatternCountMustMatchTheHeads) {
  expect_invalid_argument([] { return Mixed({}); }, "PerHead: patterns.size() = 0");
  expect_invalid_argument(
      [] {
        return Mixed({Full{}, Full{}}).cost(AttentionShape{1, 3, 1, 4, 4, 4, 4});
      },
      "patterns.size() = 2");
}

TEST(PerHeadIdentity, EachHeadEqualsItsOwnCall) {
  const AttentionShape s{2, 3, 1, 300, 300, 32, 32};
  const Problem<double> p = make_problem<double>(s, InputSet::kNormal, 81);
  const Mixed pattern({Full{.causal = true}, SlidingWindow(20, 3), Global({0, 299})});
  Tensor<double> mixed(2, 3, 300, 32, Layout::kBHLD);
  attention(pattern, p.q.cview(), p.k.cview(), p.v.cview(), mixed.view);
  for (index_t h = 0; h < 3; ++h) {
    Tensor<double> alone(2, 3, 300, 32, Layout::kBHLD);
    std::visit([&](const auto& one) { attention(one, p.q.cview(), p.k.cview(), p.v.cview(), alone.view); },
               pattern.patterns()[h]);
    for (index_t b = 0; b < 2; ++b)
      for (index_t i = 0; i < 300; ++i)
        for (index_t d = 0; d < 32; ++d) ASSERT_EQ(mixed.at(b, h, i, d), alone.at(b, h, i, d)) << "head " << h;
  }
}

TEST(PerHeadPlan, AgreesWithMaskOverRandomParameters) {
  for (std::uint64_t trial = 0; trial < 100; ++trial) {
    const auto draw = [&](std::uint64_t stream, index_t limit) {
      return static_cast<index_t>(mix64(trial * 16 + stream) % static_cast<std::uint64_t>(limit));
    };
    const AttentionShape shape{1, 3, 3, 1 + draw(1, 250), 1 + draw(2, 250), 4, 4};
    const Mixed pattern({SlidingWindow(draw(3, 40), draw(4, 40)), Full{.causal = draw(5, 2) == 0},
                         Global(random_tokens(std::min(shape.q_len, shape.kv_len), draw(6, 5), trial))});
    expect_plan_matches_mask(pattern, shape, TileShape{1 + draw(7, 64), 1 + draw(8, 130)});
    if (trial % 10 == 0) expect_counts_match_mask(pattern, shape);
    EXPECT_EQ(pattern.cost(shape).attended_pairs, count_mask_pairs(pattern, shape));
  }
}

TEST(PerHeadAttention, MatchesReference) {
  const PerHead<SlidingWindow> windows(
      {SlidingWindow::symmetric(8), SlidingWindow::causal(64), SlidingWindow(0, 3), SlidingWindow::symmetric(200)});
  for (index_t n : {1, 65, 300})
    for (index_t dim : {16, 64}) {
      SCOPED_TRACE(::testing::Message() << "n " << n << " D " << dim);
      const AttentionShape shape{1, 4, 2, n, n, dim, dim};
      expect_matches_reference<float>(windows, shape, InputSet::kNormal, static_cast<std::uint64_t>(n + dim));
      expect_matches_reference<double>(windows, shape, InputSet::kNormal, static_cast<std::uint64_t>(n + dim));
    }
}

}  // namespace
}  // namespace attnkit::testing
