// attnkit::BigBird (SPEC.md section 6): the random-block sampler on its own, literal layouts,
// identities, bad input and the kernel against the float64 reference.

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "attnkit/attention.hpp"
#include "attnkit/core/errors.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/pattern/big_bird.hpp"
#include "attnkit/pattern/block_layout.hpp"
#include "attnkit/pattern/block_sparse.hpp"
#include "attnkit/pattern/full.hpp"
#include "support/long_cases.hpp"
#include "support/pattern_checks.hpp"
#include "support/test_data.hpp"

namespace attnkit::testing {
namespace {

TEST(BigBirdSampler, RowsAvoidWindowAndGlobalsWithoutDuplicates) {
  for (index_t blocks : {1, 2, 3, 4, 5, 6, 9, 40}) {
    const BigBird pattern(64, 3, 11, 2);
    for (index_t h = 0; h < 4; ++h)
      for (index_t p = 0; p < blocks; ++p) {
        const std::vector<index_t> row = pattern.random_row(h, p, blocks);
        const bool global = p == 0 || p == blocks - 1;
        const index_t candidates =
            global ? 0 : blocks - 2 - (std::min(p + 1, blocks - 2) - std::max(p - 1, index_t{1}) + 1);
        EXPECT_EQ(static_cast<index_t>(row.size()), std::min<index_t>(3, candidates)) << "nb " << blocks << " p " << p;
        for (std::size_t e = 0; e < row.size(); ++e) {
          EXPECT_NE(row[e], 0);
          EXPECT_NE(row[e], blocks - 1);
          EXPECT_TRUE(row[e] < p - 1 || row[e] > p + 1) << "block " << row[e] << " is in the window of " << p;
          if (e > 0) {
            EXPECT_LT(row[e - 1], row[e]) << "rows are sorted, without duplicates";
          }
        }
      }
  }
}

TEST(BigBirdSampler, TableHasMinusOneForMissingEntries) {
  // nb = 6, r = 3: row 2 has candidates {4} only (0, 5 global; 1, 2, 3 window).
  const std::vector<index_t> table = BigBird(8, 3, 1).random_table(1, 6);
  ASSERT_EQ(table.size(), 18u);
  EXPECT_EQ((std::vector<index_t>(table.begin() + 6, table.begin() + 9)), (std::vector<index_t>{4, -1, -1}));
  EXPECT_EQ((std::vector<index_t>(table.begin(), table.begin() + 3)), (std::vector<index_t>{-1, -1, -1}));
}

TEST(BigBirdSampler, SameTableWhateverTheThreadCountAndOrder) {
  const BigBird pattern(64, 3, 123, 4);
  const index_t heads = 8, blocks = 64;
  const std::vector<index_t> table = pattern.random_table(heads, blocks);
  for (int threads : {1, 2}) {
    std::vector<index_t> rows(table.size(), -7);
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (index_t item = heads * blocks - 1; item >= 0; --item) {  // reverse order, any thread
      const std::vector<index_t> row = pattern.random_row(item / blocks, item % blocks, blocks);
      for (index_t e = 0; e < 3; ++e)
        rows[static_cast<std::size_t>(item * 3 + e)] =
            e < static_cast<index_t>(row.size()) ? row[static_cast<std::size_t>(e)] : -1;
    }
    EXPECT_EQ(rows, table) << threads << " threads";
  }
}

TEST(BigBirdSampler, FrequenciesAreNearUniformOverSeeds) {
  // Row p = 10 of nb = 32 has 32 - 2 - 3 = 27 candidates; each is drawn with probability 3/27.
  const index_t blocks = 32, p = 10, seeds = 20000;
  std::map<index_t, int> hits;
  for (index_t seed = 0; seed < seeds; ++seed)
    for (index_t kb : BigBird(64, 3, static_cast<std::uint64_t>(seed)).random_row(0, p, blocks)) ++hits[kb];
  EXPECT_EQ(hits.size(), 27u);
  const double expected = static_cast<double>(seeds) * 3.0 / 27.0;  // about 2222, sd about 44
  for (const auto& [kb, count] : hits) EXPECT_NEAR(count, expected, 6 * std::sqrt(expected)) << "block " << kb;
}

TEST(BigBirdLayout, WithoutRandomBlocksIsWindowPlusGlobal) {
  // b = 1, n = 5, r = 0 (literal): rows 0 and 4 see all, the others {0, p-1, p, p+1, 4}.
  const BlockSparse layout = BigBird(1, 0).block_sparse(AttentionShape{1, 1, 1, 5, 5, 1, 1});
  EXPECT_EQ(layout.layouts().front(),
            BlockLayout::from_rows(5, {{0, 1, 2, 3, 4}, {0, 1, 2, 4}, {0, 1, 2, 3, 4}, {0, 2, 3, 4}, {0, 1, 2, 3, 4}}));
}

TEST(BigBirdLayout, ThreeBlocksOrFewerIsFull) {
  const AttentionShape s{1, 2, 1, 150, 150, 16, 16};  // b = 64: 3 blocks
  const Problem<float> p = make_problem<float>(s, InputSet::kNormal, 41);
  Tensor<float> bird(1, 2, 150, 16, Layout::kBHLD), full = bird;
  attention(BigBird(64, 3, 5), p.q.cview(), p.k.cview(), p.v.cview(), bird.view);
  attention(Full{}, p.q.cview(), p.k.cview(), p.v.cview(), full.view);
  EXPECT_TRUE(all_close(bird, full, Tolerance{1e-6, 1e-5}));
}

TEST(BigBirdTable, GivenTableIsTheLayoutWithEachKeyOnce) {
  // b = 1, n = 6 (literal): HF's rand_attn [heads = 2][rows 1 .. 4][r = 2]. Head 0 row 1 names
  // block 4 and its own window block 2; head 1 names block 0 twice (HF's eval table) and 5.
  const BigBird pattern = BigBird::from_table(1, 6, 2,
                                              {4, 2, 5, 0, 1, 5, 1, 2,  //
                                               0, 0, 0, 5, 4, 4, 2, 2});
  const BlockSparse layout = pattern.block_sparse(AttentionShape{1, 2, 2, 6, 6, 1, 1});
  EXPECT_EQ(layout.layouts()[0], BlockLayout::from_rows(6, {{0, 1, 2, 3, 4, 5},
                                                            {0, 1, 2, 4, 5},
                                                            {0, 1, 2, 3, 5},
                                                            {0, 1, 2, 3, 4, 5},
                                                            {0, 1, 2, 3, 4, 5},
                                                            {0, 1, 2, 3, 4, 5}}));
  EXPECT_EQ(
      layout.layouts()[1],
      BlockLayout::from_rows(
          6,
          {{0, 1, 2, 3, 4, 5}, {0, 1, 2, 5}, {0, 1, 2, 3, 5}, {0, 2, 3, 4, 5}, {0, 2, 3, 4, 5}, {0, 1, 2, 3, 4, 5}}));
  EXPECT_EQ(pattern.random_table(2, 6)[(0 * 6 + 1) * 2], 4);  // the row as used: block 2 dropped, -1 after
  EXPECT_EQ(pattern.random_table(2, 6)[(0 * 6 + 1) * 2 + 1], -1);
  EXPECT_EQ(pattern.cost(AttentionShape{1, 2, 2, 6, 6, 1, 1}).attended_pairs,
            count_mask_pairs(pattern, AttentionShape{1, 2, 2, 6, 6, 1, 1}));
  expect_matches_reference<float>(BigBird::from_table(16, 6, 1, {5, 3, 1, 4}), AttentionShape{1, 2, 2, 90, 90, 32, 32},
                                  InputSet::kNormal, 12);
}

TEST(BigBirdErrors, BadParametersAreRejected) {
  const auto expect_message = [](auto make, const std::string& fragment) { expect_invalid_argument(make, fragment); };
  expect_message([] { return BigBird(0); }, "BigBird: block_size = 0");
  expect_message([] { return BigBird(64, -1); }, "BigBird: random_blocks = -1");
  expect_message([] { return BigBird().cost(AttentionShape{1, 1, 1, 100, 200, 8, 8}); }, "BigBird: q_len = 100");
  expect_message([] { return BigBird::from_table(4, 5, 1, {1, 2, 3, 4}); }, "BigBird::from_table: table.size() = 4");
  expect_message([] { return BigBird::from_table(4, 5, 1, {1, 2, 7}); }, "BigBird::from_table: table entry = 7");
  expect_message([] { return BigBird::from_table(4, 2, 1, {}); }, "BigBird::from_table: blocks = 2");
  expect_message(
      [] {
        return BigBird::from_table(4, 5, 1, {1, 2, 3}).cost(AttentionShape{1, 1, 1, 24, 24, 8, 8});
      },
      "BigBird: blocks of the call = 6");
  expect_message(
      [] {
        return BigBird::from_table(4, 5, 2, {1, 2, 3, 1, 2, 3}).cost(AttentionShape{1, 3, 1, 20, 20, 8, 8});
      },
      "BigBird: q heads = 3");
}

TEST(BigBirdCost, AttendedPairsCountTheMask) {
  for (index_t n : {1, 5, 40, 130, 333})
    for (index_t block : {1, 16, 50}) {
      const BigBird pattern(block, 2, static_cast<std::uint64_t>(n + block));
      const AttentionShape shape{2, 3, 1, n, n, 4, 4};
      EXPECT_EQ(pattern.cost(shape).attended_pairs, count_mask_pairs(pattern, shape))
          << "n " << n << " block " << block;
    }
}

TEST(BigBirdPlan, AgreesWithPredicate) {
  for (index_t n : {1, 70, 200, 333})
    for (index_t block : {1, 16, 50})
      expect_plan_matches_mask(BigBird(block, 2, static_cast<std::uint64_t>(n)), AttentionShape{1, 3, 1, n, n, 4, 4},
                               TileShape{32, 128});
}

TEST(BigBirdAttention, MatchesReference) {
  for (index_t block : {16, 64})
    for (index_t n : {index_t{1}, index_t{65}, index_t{129}, kSweepLength})
      for (index_t dim : {1, 33, 64}) {
        SCOPED_TRACE(::testing::Message() << "block " << block << " n " << n << " D " << dim);
        const BigBird pattern(block, 3, static_cast<std::uint64_t>(n), 1);
        const AttentionShape shape{1, 4, 2, n, n, dim, dim};
        expect_matches_reference<float>(pattern, shape, InputSet::kNormal, static_cast<std::uint64_t>(n + dim));
        expect_matches_reference<double>(pattern, shape, InputSet::kNormal, static_cast<std::uint64_t>(n + dim));
      }
  for (InputSet set : {InputSet::kPeaky, InputSet::kOffset})
    expect_matches_reference<float>(BigBird(32, 2, 3), AttentionShape{1, 2, 2, 500, 500, 64, 64}, set, 8);
  expect_matches_reference<float>(BigBird(32, 2, 3), AttentionShape{2, 2, 1, 400, 400, 24, 40}, InputSet::kNormal, 9,
                                  Layout::kBLHD);
}

}  // namespace
}  // namespace attnkit::testing
