// attnkit::Global (SPEC.md section 4, the global part): literal masks, plan properties,
// cost, bad input and the kernel against the float64 reference.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "attnkit/attention.hpp"
#include "attnkit/core/errors.hpp"
#include "attnkit/core/rng.hpp"
#include "attnkit/core/shape.hpp"
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

TEST(GlobalMask, GlobalRowsAndColumns) {
  EXPECT_EQ(mask_rows(Global({0, 3}), AttentionShape{1, 1, 1, 5, 5, 1, 1}),
            (Rows{{1, 1, 1, 1, 1}, {1, 0, 0, 1, 0}, {1, 0, 0, 1, 0}, {1, 1, 1, 1, 1}, {1, 0, 0, 1, 0}}));
}

TEST(GlobalErrors, BadTokensAreRejected) {
  const auto expect_message = [](auto make, const std::string& fragment) { expect_invalid_argument(make, fragment); };
  expect_message([] { return Global({3, 1}); }, "tokens[1] = 1");
  expect_message([] { return Global({1, 1}); }, "strictly increasing");
  expect_message([] { return Global({-2}); }, "tokens[0] = -2");
  expect_message([] { return Global({0, 9}).cost(AttentionShape{1, 1, 1, 9, 20, 4, 4}); }, "tokens.back() = 9");
}

TEST(GlobalPlan, AgreesWithPredicateOverRandomSets) {
  for (std::uint64_t trial = 0; trial < 200; ++trial) {
    const auto draw = [&](std::uint64_t stream, index_t limit) {
      return static_cast<index_t>(mix64(trial * 16 + stream) % static_cast<std::uint64_t>(limit));
    };
    const AttentionShape shape{1, 1, 1, 1 + draw(1, 300), 1 + draw(2, 300), 4, 4};
    const index_t limit = std::min(shape.q_len, shape.kv_len);
    const Global pattern(random_tokens(limit, draw(3, 12), trial));
    expect_plan_matches_mask(pattern, shape, TileShape{1 + draw(4, 96), 1 + draw(5, 160)});
  }
}

TEST(GlobalPlan, RowRunsSeparateGlobalRows) {
  const AttentionShape shape{1, 1, 1, 100, 100, 4, 4};
  const auto runs_of = [&](const auto& plan, index_t q_begin, index_t q_end) {
    std::vector<KeyRange> runs;
    plan.for_each_row_run(0, q_begin, q_end, [&](const KeyRange& run) { runs.push_back(run); });
    return runs;
  };
  const auto plan = Global({0, 1, 5, 31, 32, 40}).plan(shape, TileShape{32, 64});
  EXPECT_EQ(runs_of(plan, 0, 32), (std::vector<KeyRange>{{0, 2}, {2, 5}, {5, 6}, {6, 31}, {31, 32}}));
  EXPECT_EQ(runs_of(plan, 32, 64), (std::vector<KeyRange>{{32, 33}, {33, 40}, {40, 41}, {41, 64}}));
  EXPECT_EQ(runs_of(plan, 64, 96), (std::vector<KeyRange>{{64, 96}}));
  // A union cuts wherever either operand does; the window does not cut.
  const auto windowed = Union{SlidingWindow::symmetric(3), Global({5})}.plan(shape, TileShape{32, 64});
  EXPECT_EQ(runs_of(windowed, 0, 32), (std::vector<KeyRange>{{0, 5}, {5, 6}, {6, 32}}));
  const auto two = Union{Global({3}), Global({3, 4, 7})}.plan(shape, TileShape{32, 64});
  EXPECT_EQ(runs_of(two, 0, 32), (std::vector<KeyRange>{{0, 3}, {3, 4}, {4, 5}, {5, 7}, {7, 8}, {8, 32}}));
}

TEST(GlobalCost, AttendedPairsCountTheMask) {
  for (index_t n : {1, 7, 100}) {
    const Global pattern(random_tokens(n, 5, static_cast<std::uint64_t>(n)));
    const AttentionShape shape{1, 2, 2, n, n + 3, 4, 4};
    EXPECT_EQ(pattern.cost(shape).attended_pairs, count_mask_pairs(pattern, shape));
  }
}

TEST(GlobalIdentity, AllTokensGlobalIsFull) {
  const AttentionShape s{1, 2, 1, 140, 140, 16, 16};
  std::vector<index_t> all(140);
  for (index_t i = 0; i < 140; ++i) all[static_cast<std::size_t>(i)] = i;
  const Problem<float> p = make_problem<float>(s, InputSet::kNormal, 51);
  Tensor<float> global(1, 2, 140, 16, Layout::kBHLD), full = global;
  attention(Global(all), p.q.cview(), p.k.cview(), p.v.cview(), global.view);
  attention(Full{}, p.q.cview(), p.k.cview(), p.v.cview(), full.view);
  EXPECT_TRUE(all_close(global, full, Tolerance{1e-6, 1e-5}));
}

TEST(GlobalAttention, MatchesReference) {
  for (index_t n : {index_t{1}, index_t{65}, index_t{129}, kSweepLength})
    for (index_t dim : {1, 33, 64}) {
      SCOPED_TRACE(::testing::Message() << "n " << n << " D " << dim);
      const Global pattern(random_tokens(n, 6, static_cast<std::uint64_t>(n)));
      const AttentionShape shape{1, 2, 1, n, n, dim, dim};
      expect_matches_reference<float>(pattern, shape, InputSet::kNormal, static_cast<std::uint64_t>(n + dim));
      expect_matches_reference<double>(pattern, shape, InputSet::kNormal, static_cast<std::uint64_t>(n + dim));
    }
  const Global cls({0, 17, 200});
  for (InputSet set : {InputSet::kPeaky, InputSet::kOffset})
    expect_matches_reference<float>(cls, AttentionShape{1, 2, 2, 300, 300, 64, 64}, set, 8);
  expect_matches_reference<float>(cls, AttentionShape{2, 2, 1, 300, 260, 24, 40}, InputSet::kNormal, 9, Layout::kBLHD);
}

}  // namespace
}  // namespace attnkit::testing
