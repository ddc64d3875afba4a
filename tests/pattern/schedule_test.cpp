// attnkit::Schedule (SPEC.md section 10): the MASFormer cost arithmetic, per-layer patterns
// against the float64 reference, the all-full and no-full identities, bad input.

#include <gtest/gtest.h>

#include <cmath>
#include <variant>
#include <vector>

#include "attnkit/attention.hpp"
#include "attnkit/core/errors.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/pattern/block_sparse.hpp"
#include "attnkit/pattern/dilated.hpp"
#include "attnkit/pattern/full.hpp"
#include "attnkit/pattern/linformer.hpp"
#include "attnkit/pattern/schedule.hpp"
#include "attnkit/pattern/sliding_window.hpp"
#include "attnkit/reference/attention.hpp"
#include "support/accuracy.hpp"
#include "support/pattern_checks.hpp"
#include "support/test_data.hpp"

namespace attnkit::testing {
namespace {

/// The paper's case (arXiv 2310.12442): 24 layers at n = 8192, causal full attention in 4,
/// causal block attention of b = 1024 in 20. Pairs per head, from the closed forms:
/// full n (n + 1) / 2, blocks (n / b) b (b + 1) / 2, so the stack keeps
/// (4 + 20 (b + 1) / (n + 1)) / 24 = 27.1% of an all-full stack's pairs (a 72.9% cut).
TEST(Schedule, MasformerCostIsThePapersArithmetic) {
  constexpr index_t kLayers = 24, kFull = 4, kN = 8192, kBlock = 1024;
  const Schedule schedule = Schedule::masformer(kLayers, kFull, BlockSparse::local(kBlock, kN / kBlock, true));
  const AttentionShape shape{1, 8, 8, kN, kN, 64, 64};
  const ScheduleCost cost = schedule.cost(shape);
  ASSERT_EQ(cost.layers.size(), static_cast<std::size_t>(kLayers));
  const double n = kN, b = kBlock, heads = 8;
  const double full_pairs = heads * n * (n + 1) / 2, block_pairs = heads * (n / b) * b * (b + 1) / 2;
  for (index_t l = 0; l < kLayers; ++l) {
    EXPECT_DOUBLE_EQ(cost.layers[static_cast<std::size_t>(l)].attended_pairs, l < kFull ? full_pairs : block_pairs)
        << "layer " << l;
    EXPECT_DOUBLE_EQ(cost.layers[static_cast<std::size_t>(l)].flops,
                     2 * (l < kFull ? full_pairs : block_pairs) * (64 + 64))
        << "layer " << l;
  }
  EXPECT_DOUBLE_EQ(cost.total.attended_pairs, kFull * full_pairs + (kLayers - kFull) * block_pairs);
  EXPECT_DOUBLE_EQ(cost.all_full.attended_pairs, kLayers * full_pairs);
  EXPECT_NEAR(cost.pairs_fraction(), 0.271, 0.0005);
  EXPECT_NEAR(cost.flops_fraction(), 0.271, 0.0005);
  EXPECT_NEAR(1 - cost.pairs_fraction(), 0.729, 0.0005);
}

TEST(Schedule, NoFullLayersIsTheSparseStackAndAllFullIsTheBaseline) {
  const AttentionShape shape{2, 4, 2, 1000, 1000, 32, 16};
  const BlockSparse sparse = BlockSparse::local(100, 10, true);
  const ScheduleCost none = Schedule::masformer(6, 0, sparse).cost(shape);
  EXPECT_DOUBLE_EQ(none.total.attended_pairs, 6 * sparse.cost(shape).attended_pairs);
  EXPECT_DOUBLE_EQ(none.pairs_fraction(),
                   sparse.cost(shape).attended_pairs / Full{.causal = true}.cost(shape).attended_pairs);
  const ScheduleCost all = Schedule::masformer(6, 6, sparse).cost(shape);
  EXPECT_DOUBLE_EQ(all.total.flops, all.all_full.flops);
  EXPECT_DOUBLE_EQ(all.flops_fraction(), 1.0);
  // An explicit list, bidirectional baseline by default; extra FLOP (Linformer's
  // projections) count in flops and not in pairs.
  const Linformer linformer(16, 1000, std::vector<float>(16 * 1000, 0.01f), std::vector<float>(16 * 1000, 0.01f));
  const Schedule mixed({Full{}, SlidingWindow::symmetric(8), linformer});
  const ScheduleCost cost = mixed.cost(shape);
  EXPECT_DOUBLE_EQ(cost.layers[1].attended_pairs, SlidingWindow::symmetric(8).cost(shape).attended_pairs);
  EXPECT_DOUBLE_EQ(cost.total.extra_flops, linformer.cost(shape).extra_flops);
  EXPECT_DOUBLE_EQ(cost.all_full.attended_pairs, 3 * Full{}.cost(shape).attended_pairs);
  EXPECT_EQ(std::get<Full>(mixed.at(0)).causal, false);
}

/// Every layer of a mixed stack through attnkit::attention against reference::attention on
/// the same layer (SPEC.md section 11: atol 2e-5 max|V|, rtol 1e-4 for float).
TEST(Schedule, EachLayerMatchesTheReference) {
  const AttentionShape s{1, 4, 2, 96, 96, 16, 24};
  const Problem<float> p = make_problem<float>(s, InputSet::kNormal, 3);
  const Schedule masformer = Schedule::masformer(3, 1, BlockSparse::local(16, 6, true));
  const Schedule mixed({SlidingWindow::causal(20), Dilated::symmetric(8, {1, 2, 3, 4}), Full{.causal = true}});
  for (const Schedule* schedule : {&masformer, &mixed}) {
    for (index_t l = 0; l < schedule->layers(); ++l) {
      Tensor<float> out(1, 4, 96, 24, Layout::kBHLD), ref = out, lse(1, 4, 96, 1, Layout::kBHLD), ref_lse = lse;
      attention(schedule->at(l), p.q.cview(), p.k.cview(), p.v.cview(), out.view, lse.view);
      reference::attention(schedule->at(l), p.q.cview(), p.k.cview(), p.v.cview(), ref.view, ref_lse.view);
      EXPECT_TRUE(all_close(out, ref, Tolerance{2e-5 * max_abs(p.v), 1e-4})) << "layer " << l;
      EXPECT_TRUE(all_close(lse, ref_lse, Tolerance{2e-5, 2e-5})) << "layer " << l;
    }
  }
  // The first masformer layer is causal full attention, the others the block pattern.
  EXPECT_TRUE(std::get<Full>(masformer.at(0)).causal);
  EXPECT_TRUE(std::holds_alternative<BlockSparse>(masformer.at(2)));
}

TEST(Schedule, RejectsBadInput) {
  const BlockSparse sparse = BlockSparse::local(16, 4, true);
  expect_invalid_argument([&] { Schedule::masformer(4, 5, sparse); }, "full_layers");
  expect_invalid_argument([&] { Schedule::masformer(4, -1, sparse); }, "full_layers");
  expect_invalid_argument([&] { Schedule::masformer(0, 0, sparse); }, "layers");
  expect_invalid_argument([] { Schedule(std::vector<Schedule::Layer>{}); }, "layers.size()");
  const Schedule schedule = Schedule::masformer(4, 1, sparse);
  expect_invalid_argument([&] { schedule.at(4); }, "Schedule::at: layer = 4");
  expect_invalid_argument([&] { schedule.at(-1); }, "Schedule::at: layer");
  expect_invalid_argument([] { BlockSparse::local(16, 0); }, "BlockSparse::local: blocks");
}

}  // namespace
}  // namespace attnkit::testing
