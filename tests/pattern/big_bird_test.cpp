// attnkit::BigBird (SPEC.md section 6): the random-block sampler on its own, literal layouts,
// identities, bad input and the kernel against the float64 reference.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "attnkit/attention.hpp"
#include "attnkit/cache/kv_cache.hpp"
#include "attnkit/core/errors.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/decode.hpp"
#include "attnkit/pattern/big_bird.hpp"
#include "attnkit/pattern/block_layout.hpp"
#include "attnkit/pattern/block_sparse.hpp"
#include "attnkit/pattern/full.hpp"
#include "attnkit/pattern/global.hpp"
#include "attnkit/pattern/intersection.hpp"
#include "attnkit/pattern/per_head.hpp"
#include "attnkit/pattern/union.hpp"
#include "attnkit/reference/attention.hpp"
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

TEST(BigBirdTable, GivenTableIsTheLayoutWithRepeatsAsMultiplicities) {
  // b = 1, n = 6 (literal): HF's rand_attn [heads = 2][rows 1 .. 4][r = 2]. Head 0 row 1 names
  // block 4 and its own window block 2; head 1 names block 0 twice (HF's eval table) and 5.
  const BigBird pattern = BigBird::from_table(1, 6, 2,
                                              {4, 2, 5, 0, 1, 5, 1, 2,  //
                                               0, 0, 0, 5, 4, 4, 2, 2});
  const AttentionShape shape{1, 2, 2, 6, 6, 1, 1};
  const BlockSparse layout = pattern.block_sparse(shape);
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
  // Multiplicities (SPEC.md section 6), by hand: the window and global blocks once, plus each
  // table entry. Head 0 row 1: block 2 is window + entry (2); head 1 row 1: block 0 is global
  // and window + two entries (3); row 2: 0 once more (2), 5 once more (2); row 3: 4 twice more
  // (3, its own block); row 4: 2 twice (2 is a plain random block there: 2).
  const auto mask = pattern.mask(shape);
  EXPECT_TRUE(pattern.repeats_blocks());
  EXPECT_EQ(mask.multiplicity(0, 1, 2), 2);
  EXPECT_EQ(mask.multiplicity(0, 1, 4), 1);
  EXPECT_EQ(mask.multiplicity(1, 1, 0), 3);
  EXPECT_EQ(mask.multiplicity(1, 2, 0), 2);
  EXPECT_EQ(mask.multiplicity(1, 2, 5), 2);
  EXPECT_EQ(mask.multiplicity(1, 3, 4), 3);
  EXPECT_EQ(mask.multiplicity(1, 4, 2), 2);
  EXPECT_EQ(mask.multiplicity(1, 4, 1), 0);
  EXPECT_EQ(mask.multiplicity(1, 0, 3), 1);  // global rows attend every block once
  EXPECT_EQ(pattern.cost(shape).attended_pairs, count_mask_pairs(pattern, shape));
  expect_matches_reference<float>(BigBird::from_table(16, 6, 1, {5, 3, 1, 4}), AttentionShape{1, 2, 2, 90, 90, 32, 32},
                                  InputSet::kNormal, 12);
  // Row 1 names block 5, the last (global) block: mu 2 there. A table naming only blocks
  // outside each row's window and global blocks has no repeats.
  EXPECT_TRUE(BigBird::from_table(16, 6, 1, {5, 3, 1, 4}).repeats_blocks());
  EXPECT_FALSE(BigBird::from_table(16, 6, 1, {3, 4, 1, 1}).repeats_blocks());
}

/// o_i of SPEC.md section 0 with mu_ij from section 6 for a given table, written from the
/// definition in double: rows of blocks 0 and nb - 1 attend every key once; a row of block p
/// attends block kb (1 if kb is 0, nb - 1 or in p - 1 ... p + 1) + (entries of the table's row
/// naming kb) times.
double table_definition(const Problem<double>& p, const std::vector<index_t>& table, index_t blocks, index_t r,
                        index_t b, index_t batch, index_t h, index_t i, index_t d) {
  const AttentionShape& s = p.shape;
  const index_t kv = h / s.group_size(), row_block = i / b;
  double top = -std::numeric_limits<double>::infinity();
  std::vector<double> logits(static_cast<std::size_t>(s.kv_len)), mu(logits.size());
  for (index_t j = 0; j < s.kv_len; ++j) {
    const index_t kb = j / b;
    double count = 1;
    if (row_block != 0 && row_block != blocks - 1) {
      count = (kb == 0 || kb == blocks - 1 || std::abs(kb - row_block) <= 1) ? 1 : 0;
      for (index_t t = 0; t < r; ++t) count += table[static_cast<std::size_t>((row_block - 1) * r + t)] == kb ? 1 : 0;
    }
    mu[static_cast<std::size_t>(j)] = count;
    double dot = 0;
    for (index_t e = 0; e < s.head_dim; ++e) dot += p.q.view(batch, h, i, e) * p.k.view(batch, kv, j, e);
    logits[static_cast<std::size_t>(j)] = dot / std::sqrt(static_cast<double>(s.head_dim));
    if (count > 0) top = std::max(top, logits[static_cast<std::size_t>(j)]);
  }
  double z = 0, sum = 0;
  for (index_t j = 0; j < s.kv_len; ++j) {
    const double w = mu[static_cast<std::size_t>(j)] * std::exp(logits[static_cast<std::size_t>(j)] - top);
    z += w;
    sum += w * p.v.view(batch, kv, j, d);
  }
  return sum / z;
}

// Hugging Face BigBird in eval mode: its rand_attn is all zeros, so block 0 enters every row of
// blocks 1 ... nb - 2 1 + r times. from_table reproduces that multiplicity (rows 1 ... nb - 2
// of blocks 0 differ from a once-counted block 0 by tens of percent of max |V|).
TEST(BigBirdTable, HuggingFaceEvalTableCountsBlockZeroOnePlusRTimes) {
  const index_t b = 16, blocks = 9, r = 3, n = blocks * b - 5;  // ragged last block
  const std::vector<index_t> zeros(static_cast<std::size_t>((blocks - 2) * r), 0);
  const BigBird eval = BigBird::from_table(b, blocks, 1, zeros);
  const AttentionShape s{1, 2, 1, n, n, 32, 24};
  const Problem<double> p = make_problem<double>(s, InputSet::kNormal, 41);
  Tensor<double> out(1, 2, n, 24, Layout::kBHLD), ref = out;
  attention(eval, p.q.cview(), p.k.cview(), p.v.cview(), out.view);
  reference::attention(eval, p.q.cview(), p.k.cview(), p.v.cview(), ref.view);
  const double v_max = max_abs(p.v);
  for (index_t h = 0; h < 2; ++h)
    for (index_t i = 0; i < n; ++i)
      for (index_t d = 0; d < 24; ++d) {
        const double expected = table_definition(p, zeros, blocks, r, b, 0, h, i, d);
        ASSERT_NEAR(out.at(0, h, i, d), expected, 1e-12 * v_max) << h << " " << i << " " << d;
        ASSERT_NEAR(ref.at(0, h, i, d), expected, 1e-12 * v_max) << h << " " << i << " " << d;
      }
  // float kernels, SPEC.md section 11's tolerances against the reference.
  expect_matches_reference<float>(eval, AttentionShape{2, 4, 2, n, n, 64, 64}, InputSet::kNormal, 42);
  expect_matches_reference<float>(
      BigBird::from_table(b, blocks, 1, {1, 1, 7, 2, 3, 3, 0, 0, 5, 8, 8, 8, 2, 2, 2, 6, 6, 1, 7, 7, 7}),
      AttentionShape{1, 2, 2, n, n, 32, 32}, InputSet::kNormal, 43);
}

// A multiplicity has no meaning in a union or an intersection of 0/1 masks, nor over a cache's
// spans: refused by name.
TEST(BigBirdTable, RepeatsAreRefusedByCombinationsAndCaches) {
  const BigBird eval = BigBird::from_table(16, 5, 1, std::vector<index_t>(9, 0));
  const AttentionShape s{1, 1, 1, 80, 80, 8, 8};
  expect_invalid_argument([&] { return Union{eval, Global({3})}.plan(s, TileShape{}); }, "Union: operand");
  expect_invalid_argument([&] { return Union{eval, Global({3})}.mask(s); }, "Union: operand");
  expect_invalid_argument([&] { return Intersection{eval, Full{}}.plan(s, TileShape{}); }, "Intersection: operand");
  expect_invalid_argument([&] { return PerHead<BigBird>({eval}).plan(s, TileShape{}); }, "PerHead: operand");
  // Without repeats the same combinations plan.
  const BigBird plain = BigBird::from_table(16, 6, 1, {3, 4, 1, 1});
  EXPECT_FALSE(plain.repeats_blocks());
  EXPECT_NO_THROW((Union{plain, Global({3})}.plan(AttentionShape{1, 1, 1, 96, 96, 8, 8}, TileShape{})));
  std::vector<float> k(80 * 8, 0.5f), v(k), q(8, 0.25f), out(8, 7.0f);
  std::vector<index_t> lengths{80};
  const KvCache<float> cache{bhld(k.data(), 1, 1, 80, 8), bhld(v.data(), 1, 1, 80, 8), lengths};
  expect_invalid_argument(
      [&] {
        attention(eval, bhld(static_cast<const float*>(q.data()), 1, 1, 1, 8), cache, bhld(out.data(), 1, 1, 1, 8));
        return 0;
      },
      "repeats blocks");
  EXPECT_EQ(out, std::vector<float>(8, 7.0f));
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
