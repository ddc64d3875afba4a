// attnkit::BlockSparse and BlockLayout (SPEC.md section 5): literal masks, BlockBERT helpers,
// plan properties, identities, bad input and the kernel against the float64 reference.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "attnkit/attention.hpp"
#include "attnkit/core/errors.hpp"
#include "attnkit/core/rng.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/core/tensor_view.hpp"
#include "attnkit/pattern/block_layout.hpp"
#include "attnkit/pattern/block_sparse.hpp"
#include "attnkit/pattern/full.hpp"
#include "attnkit/pattern/per_head.hpp"
#include "support/long_cases.hpp"
#include "support/pattern_checks.hpp"
#include "support/test_data.hpp"

namespace attnkit::testing {
namespace {

using Rows = std::vector<std::vector<int>>;

Rows mask_of(const BlockSparse& pattern, index_t head, index_t lq, index_t lk) {
  const index_t heads = static_cast<index_t>(pattern.layouts().size());
  return mask_rows(pattern, AttentionShape{1, heads, 1, lq, lk, 1, 1}, head);
}

/// A random layout of the given density, deterministic in `seed`.
BlockLayout random_layout(index_t query_blocks, index_t key_blocks, double density, std::uint64_t seed) {
  std::vector<std::uint8_t> bits(static_cast<std::size_t>(query_blocks * key_blocks));
  for (std::size_t e = 0; e < bits.size(); ++e)
    bits[e] = static_cast<double>(mix64(seed * 1000003 + e) % 1000) < density * 1000 ? 1 : 0;
  return BlockLayout::from_bitmap(query_blocks, key_blocks, bits);
}

void expect_rejected(const std::function<void()>& make, const std::string& fragment) {
  expect_invalid_argument(make, fragment);
}

TEST(BlockSparseMask, RaggedLastBlock) {
  // b = 2, n = 5: blocks {0,1}, {2,3}, {4}; layout rows: {0, 2}, {1}, {0, 1, 2}.
  const BlockSparse pattern(2, {BlockLayout::from_rows(3, {{0, 2}, {1}, {0, 1, 2}})});
  EXPECT_EQ(mask_of(pattern, 0, 5, 5),
            (Rows{{1, 1, 0, 0, 1}, {1, 1, 0, 0, 1}, {0, 0, 1, 1, 0}, {0, 0, 1, 1, 0}, {1, 1, 1, 1, 1}}));
}

TEST(BlockSparseMask, CausalKeepsOnlyPastKeysInsideBlocks) {
  const BlockSparse pattern(2, {BlockLayout::from_rows(2, {{0}, {0, 1}})}, /*causal=*/true);
  EXPECT_EQ(mask_of(pattern, 0, 4, 4), (Rows{{1, 0, 0, 0}, {1, 1, 0, 0}, {1, 1, 1, 0}, {1, 1, 1, 1}}));
}

TEST(BlockSparseMask, BitmapAndRowListsAgree) {
  const BlockLayout from_bits = BlockLayout::from_bitmap(2, 3, {1, 0, 1, 0, 1, 1});
  const BlockLayout from_rows = BlockLayout::from_rows(3, {{0, 2}, {1, 2}});
  EXPECT_EQ(from_bits, from_rows);
  EXPECT_EQ(from_bits.nonzeros(), 4);
}

TEST(BlockSparseMask, BlockBertPermutationsAndShifts) {
  // Head 0: identity (local), head 1: shift by 1, blocks of 2 over n = 6 (3 blocks).
  const BlockSparse shifts = BlockSparse::cyclic_shifts(2, 3, {0, 1});
  EXPECT_EQ(mask_of(shifts, 0, 6, 6), (Rows{{1, 1, 0, 0, 0, 0},
                                            {1, 1, 0, 0, 0, 0},
                                            {0, 0, 1, 1, 0, 0},
                                            {0, 0, 1, 1, 0, 0},
                                            {0, 0, 0, 0, 1, 1},
                                            {0, 0, 0, 0, 1, 1}}));
  EXPECT_EQ(mask_of(shifts, 1, 6, 6), (Rows{{0, 0, 1, 1, 0, 0},
                                            {0, 0, 1, 1, 0, 0},
                                            {0, 0, 0, 0, 1, 1},
                                            {0, 0, 0, 0, 1, 1},
                                            {1, 1, 0, 0, 0, 0},
                                            {1, 1, 0, 0, 0, 0}}));
  const BlockSparse permuted = BlockSparse::blockbert(2, {{2, 0, 1}});
  EXPECT_EQ(permuted.layouts().front(), BlockLayout::from_rows(3, {{2}, {0}, {1}}));
}

TEST(BlockSparseErrors, BadParametersAreRejected) {
  expect_rejected([] { BlockSparse(0, {BlockLayout::from_rows(1, {{0}})}); }, "BlockSparse: block_size = 0");
  expect_rejected([] { BlockSparse(4, {}); }, "layouts.size() = 0");
  expect_rejected([] { BlockLayout::from_bitmap(2, 2, {1, 0, 1}); }, "bits.size() = 3");
  expect_rejected([] { BlockLayout::from_rows(3, {{1, 0}}); }, "strictly increasing");
  expect_rejected([] { BlockLayout::from_rows(3, {{0, 0}}); }, "strictly increasing");
  expect_rejected([] { BlockLayout::from_rows(3, {{3}}); }, "rows[0][0] = 3");
  expect_rejected([] { BlockSparse::blockbert(2, {{0, 0, 1}}); }, "permutation");
  expect_rejected(
      [] {
        BlockSparse(2, {BlockLayout::from_rows(2, {{0}, {1}}), BlockLayout::from_rows(3, {{0}, {1}})});
      },
      "layouts[1] blocks");
}

TEST(BlockSparseErrors, LayoutShapeMustMatchTheCall) {
  const BlockSparse pattern(4, {BlockLayout::from_rows(2, {{0}, {1}})});  // 2 x 2 blocks of 4: n in (4, 8]
  const AttentionShape s{1, 1, 1, 9, 9, 8, 8};
  std::vector<float> q(9 * 8), k(q), v(q), out(q.size(), 7.0f);
  const auto view = [&](std::vector<float>& x) { return bhld(x.data(), 1, 1, 9, 8); };
  expect_rejected([&] { attention(pattern, view(q), view(k), view(v), view(out)); }, "layout query blocks = 2");
  for (float x : out) EXPECT_EQ(x, 7.0f);
  expect_rejected([&] { (void)pattern.cost(AttentionShape{1, 1, 1, 8, 12, 8, 8}); }, "layout key blocks = 2");
  const BlockSparse per_head(4, {BlockLayout::from_rows(2, {{0}, {1}}), BlockLayout::from_rows(2, {{1}, {0}})});
  expect_rejected([&] { (void)per_head.plan(AttentionShape{1, 4, 1, 8, 8, 8, 8}, TileShape{}); }, "layouts.size() = 2");
  (void)s;
}

TEST(BlockSparsePlan, AgreesWithPredicateOverRandomParameters) {
  for (std::uint64_t trial = 0; trial < 200; ++trial) {
    const auto draw = [&](std::uint64_t stream, index_t limit) {
      return static_cast<index_t>(mix64(trial * 16 + stream) % static_cast<std::uint64_t>(limit));
    };
    const index_t block = 1 + draw(1, 100);
    const AttentionShape shape{1, 2, 1, draw(2, 400), draw(3, 400), 4, 4};
    const index_t qb = detail::ceil_div(shape.q_len, block), kb = detail::ceil_div(shape.kv_len, block);
    const double density = 0.1 + 0.2 * static_cast<double>(draw(4, 5));
    std::vector<BlockLayout> layouts{random_layout(qb, kb, density, trial)};
    if (draw(5, 2) == 1) layouts.push_back(random_layout(qb, kb, density, trial + 7777));
    const TileShape tiles{1 + draw(6, 96), 1 + draw(7, 160)};
    for (bool causal : {false, true}) expect_plan_matches_mask(BlockSparse(block, layouts, causal), shape, tiles);
  }
}

TEST(BlockSparseCost, AttendedPairsCountTheMask) {
  for (bool causal : {false, true})
    for (index_t n : {1, 5, 37, 100}) {
      const index_t block = 8;
      const index_t blocks = detail::ceil_div(n, block);
      const BlockSparse pattern(block,
                                {random_layout(blocks, blocks, 0.5, static_cast<std::uint64_t>(n)),
                                 random_layout(blocks, blocks, 0.5, static_cast<std::uint64_t>(n) + 1)},
                                causal);
      const AttentionShape shape{3, 2, 1, n, n, 4, 6};
      EXPECT_EQ(pattern.cost(shape).attended_pairs, count_mask_pairs(pattern, shape))
          << "n " << n << " causal " << causal;
    }
}

TEST(BlockSparseIdentity, AllOnesLayoutEqualsFull) {
  const AttentionShape s{1, 2, 2, 300, 300, 32, 32};
  const index_t blocks = detail::ceil_div(300, 64);
  const BlockSparse ones(64, {BlockLayout::from_bitmap(blocks, blocks, std::vector<std::uint8_t>(blocks * blocks, 1))});
  const Problem<float> p = make_problem<float>(s, InputSet::kNormal, 31);
  Tensor<float> sparse(1, 2, 300, 32, Layout::kBHLD), full = sparse;
  attention(ones, p.q.cview(), p.k.cview(), p.v.cview(), sparse.view);
  attention(Full{}, p.q.cview(), p.k.cview(), p.v.cview(), full.view);
  EXPECT_TRUE(all_close(sparse, full, Tolerance{1e-6, 1e-5}));
}

TEST(BlockSparseIdentity, IdentityLayoutIsIndependentAttentionPerBlock) {
  // Block diagonal: block p's output is full attention over block p's rows alone.
  const index_t n = 250, block = 48, dim = 16;
  const index_t blocks = detail::ceil_div(n, block);
  const Problem<double> p = make_problem<double>(AttentionShape{1, 1, 1, n, n, dim, dim}, InputSet::kNormal, 32);
  Tensor<double> out(1, 1, n, dim, Layout::kBHLD), per_block = out;
  attention(BlockSparse::cyclic_shifts(block, blocks, {0}), p.q.cview(), p.k.cview(), p.v.cview(), out.view);
  for (index_t b0 = 0; b0 < n; b0 += block) {
    const index_t rows = std::min(block, n - b0);
    const auto slice = [&](const Tensor<double>& t) { return bhld(t.data.data() + b0 * dim, 1, 1, rows, dim); };
    attention(Full{}, slice(p.q), slice(p.k), slice(p.v), bhld(per_block.data.data() + b0 * dim, 1, 1, rows, dim));
  }
  EXPECT_TRUE(all_close(out, per_block, Tolerance{1e-14, 1e-13}));
}

struct BlockCase {
  index_t block;
  bool causal;
  bool per_head;
};

class BlockSparseAttention : public ::testing::TestWithParam<BlockCase> {};

TEST_P(BlockSparseAttention, MatchesReference) {
  const BlockCase c = GetParam();
  for (index_t n : {index_t{1}, index_t{63}, index_t{65}, index_t{129}, kSweepLength}) {
    const index_t blocks = detail::ceil_div(n, c.block);
    std::vector<BlockLayout> layouts{random_layout(blocks, blocks, 0.3, static_cast<std::uint64_t>(n))};
    if (c.per_head) layouts.push_back(random_layout(blocks, blocks, 0.3, static_cast<std::uint64_t>(n) + 99));
    const BlockSparse pattern(c.block, layouts, c.causal);
    for (index_t dim : {1, 33, 64}) {
      SCOPED_TRACE(::testing::Message() << "n " << n << " D " << dim);
      const AttentionShape shape{1, 2, 1, n, n, dim, dim};
      expect_matches_reference<float>(pattern, shape, InputSet::kNormal, static_cast<std::uint64_t>(n + dim));
      expect_matches_reference<double>(pattern, shape, InputSet::kNormal, static_cast<std::uint64_t>(n + dim));
    }
  }
  // Peaky and offset inputs, Lq != Lk with Dv != D in [B, L, H, D] strides.
  const index_t qb = detail::ceil_div(300, c.block), kb = detail::ceil_div(170, c.block);
  std::vector<BlockLayout> layouts{random_layout(qb, kb, 0.4, 5)};
  if (c.per_head) layouts.push_back(random_layout(qb, kb, 0.4, 6));
  const BlockSparse pattern(c.block, layouts, c.causal);
  for (InputSet set : {InputSet::kPeaky, InputSet::kOffset})
    expect_matches_reference<float>(pattern, AttentionShape{1, 2, 2, 300, 170, 64, 64}, set, 8);
  expect_matches_reference<float>(pattern, AttentionShape{2, 2, 1, 300, 170, 24, 40}, InputSet::kNormal, 9,
                                  Layout::kBLHD);
}

INSTANTIATE_TEST_SUITE_P(Blocks, BlockSparseAttention,
                         ::testing::Values(BlockCase{1, false, false}, BlockCase{7, true, true},
                                           BlockCase{32, false, true}, BlockCase{64, true, false},
                                           BlockCase{100, false, false}, BlockCase{128, true, true},
                                           BlockCase{256, false, true}),
                         [](const ::testing::TestParamInfo<BlockCase>& param_info) {
                           const BlockCase& c = param_info.param;
                           return "Block" + std::to_string(c.block) + (c.causal ? "Causal" : "") +
                                  (c.per_head ? "PerHead" : "Shared");
                         });

}  // namespace
}  // namespace attnkit::testing
