// attnkit::attention with GlobalProjections (SPEC.md section 4, Longformer's Qg, Kg, Vg):
// against the float64 reference assembled from its definition, identities and bad input.

#include <gtest/gtest.h>

#include <vector>

#include "attnkit/attention.hpp"
#include "attnkit/core/concepts.hpp"
#include "attnkit/core/cost.hpp"
#include "attnkit/core/errors.hpp"
#include "attnkit/core/options.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/global_projections.hpp"
#include "attnkit/pattern/dilated.hpp"
#include "attnkit/pattern/full.hpp"
#include "attnkit/pattern/global.hpp"
#include "attnkit/pattern/global_projections.hpp"
#include "attnkit/pattern/sliding_window.hpp"
#include "attnkit/pattern/union.hpp"
#include "attnkit/reference/attention.hpp"
#include "support/pattern_checks.hpp"
#include "support/test_data.hpp"

namespace attnkit::testing {
namespace {

/// Expected output from the definition: non-global rows follow the pattern with q, k, v;
/// global rows attend every key with qg, kg, vg (both halves by the float64 reference).
template <class P>
Tensor<double> expected_output(const P& pattern, const Problem<double>& local, const Problem<double>& global,
                               const std::vector<index_t>& tokens, Tensor<double>& expected_lse) {
  const AttentionShape& s = local.shape;
  Tensor<double> out(s.batch, s.q_heads, s.q_len, s.value_dim, Layout::kBHLD), global_out = out;
  Tensor<double> global_lse = expected_lse;
  reference::attention(pattern, local.q.cview(), local.k.cview(), local.v.cview(), out.view, expected_lse.view);
  reference::attention(Full{}, global.q.cview(), global.k.cview(), global.v.cview(), global_out.view, global_lse.view);
  for (index_t b = 0; b < s.batch; ++b)
    for (index_t h = 0; h < s.q_heads; ++h)
      for (index_t token : tokens) {
        for (index_t d = 0; d < s.value_dim; ++d) out.at(b, h, token, d) = global_out.at(b, h, token, d);
        expected_lse.at(b, h, token, 0) = global_lse.at(b, h, token, 0);
      }
  return out;
}

TEST(GlobalProjections, GlobalRowsUseTheirOwnProjections) {
  const AttentionShape s{2, 4, 2, 300, 300, 32, 24};
  const std::vector<index_t> tokens{0, 7, 150};
  const Union longformer{Dilated::symmetric(16, {1, 2, 3, 4}), Global(tokens)};
  const Problem<double> local = make_problem<double>(s, InputSet::kNormal, 91);
  const Problem<double> global = make_problem<double>(s, InputSet::kNormal, 92);
  Tensor<double> expected_lse(2, 4, 300, 1, Layout::kBHLD);
  const Tensor<double> expected = expected_output(longformer, local, global, tokens, expected_lse);
  Tensor<double> out(2, 4, 300, 24, Layout::kBHLD), lse = expected_lse;
  attention(longformer, local.q.cview(), local.k.cview(), local.v.cview(),
            GlobalProjections<double>{global.q.cview(), global.k.cview(), global.v.cview()}, out.view, lse.view);
  EXPECT_TRUE(all_close(out, expected, Tolerance{1e-12 * max_abs(global.v), 1e-12}));
  EXPECT_TRUE(all_close(lse, expected_lse, Tolerance{1e-12, 1e-12}));
}

TEST(GlobalProjections, SameProjectionsEqualThePlainCall) {
  const AttentionShape s{1, 2, 1, 200, 200, 16, 16};
  const Union longformer{SlidingWindow::symmetric(8), Global({3, 100})};
  const Problem<float> p = make_problem<float>(s, InputSet::kNormal, 93);
  Tensor<float> plain(1, 2, 200, 16, Layout::kBHLD), projected = plain;
  attention(longformer, p.q.cview(), p.k.cview(), p.v.cview(), plain.view);
  attention(longformer, p.q.cview(), p.k.cview(), p.v.cview(),
            GlobalProjections<float>{p.q.cview(), p.k.cview(), p.v.cview()}, projected.view);
  EXPECT_TRUE(all_close(projected, plain, Tolerance{1e-6, 1e-5}));
}

/// Both passes run in one region on the same team: the result does not depend on its size.
TEST(GlobalProjections, BitwiseIdenticalAcrossThreadCounts) {
  const AttentionShape s{2, 4, 2, 700, 700, 32, 32};
  const Union longformer{Dilated::symmetric(64, {1, 2, 1, 2}), Global({0, 333, 699})};
  const Problem<float> local = make_problem<float>(s, InputSet::kNormal, 96);
  const Problem<float> global = make_problem<float>(s, InputSet::kNormal, 97);
  const GlobalProjections<float> projections{global.q.cview(), global.k.cview(), global.v.cview()};
  Tensor<float> one(2, 4, 700, 32, Layout::kBHLD), two = one, three = one;
  Tensor<float> lse_one(2, 4, 700, 1, Layout::kBHLD), lse_two = lse_one;
  attention(longformer, local.q.cview(), local.k.cview(), local.v.cview(), projections, one.view, lse_one.view,
            Options{.threads = 1});
  attention(longformer, local.q.cview(), local.k.cview(), local.v.cview(), projections, two.view, lse_two.view,
            Options{.threads = 2});
  attention(longformer, local.q.cview(), local.k.cview(), local.v.cview(), projections, three.view,
            Options{.threads = 3});
  EXPECT_EQ(one.data, two.data);
  EXPECT_EQ(one.data, three.data);
  EXPECT_EQ(lse_one.data, lse_two.data);
}

static_assert(AttentionPattern<WithGlobalProjections<Global, float>> &&
                  PlansFor<WithGlobalProjections<Global, float>, float> &&
                  !PlansFor<WithGlobalProjections<Global, float>, double>,
              "a pattern holding float projections plans float calls only");

/// The projections as a pattern, through attnkit::attention itself: the same bits as the
/// overload taking them as an argument, and its cost is the pattern's plus the global pass.
TEST(GlobalProjections, AreAPatternThroughTheFrontDoor) {
  const AttentionShape s{1, 4, 2, 260, 260, 16, 24};
  const Union longformer{SlidingWindow::symmetric(12), Global({0, 100})};
  const Problem<float> local = make_problem<float>(s, InputSet::kNormal, 98);
  const Problem<float> global = make_problem<float>(s, InputSet::kNormal, 99);
  const GlobalProjections<float> projections{global.q.cview(), global.k.cview(), global.v.cview()};
  const WithGlobalProjections<Union<SlidingWindow, Global>, float> pattern{longformer, projections};
  Tensor<float> as_pattern(1, 4, 260, 24, Layout::kBHLD), as_argument = as_pattern;
  Tensor<float> lse_pattern(1, 4, 260, 1, Layout::kBHLD), lse_argument = lse_pattern;
  attention(pattern, local.q.cview(), local.k.cview(), local.v.cview(), as_pattern.view, lse_pattern.view);
  attention(longformer, local.q.cview(), local.k.cview(), local.v.cview(), projections, as_argument.view,
            lse_argument.view);
  EXPECT_EQ(as_pattern.data, as_argument.data);
  EXPECT_EQ(lse_pattern.data, lse_argument.data);
  const PatternCost cost = pattern.cost(s), local_cost = longformer.cost(s);
  const double global_pass = 2.0 * 4 * 2 * 260 * (16 + 24);  // B Hq g Lk (D + Dv) pairs' FLOP
  EXPECT_EQ(cost.attended_pairs, local_cost.attended_pairs);
  EXPECT_DOUBLE_EQ(cost.flops, local_cost.flops + global_pass);
  EXPECT_DOUBLE_EQ(cost.extra_flops, local_cost.extra_flops + global_pass);
}

TEST(GlobalProjections, MismatchedShapesAreRejectedBeforeWriting) {
  const AttentionShape s{1, 2, 1, 50, 50, 16, 16};
  const Global globals({0});
  const Problem<float> p = make_problem<float>(s, InputSet::kNormal, 94);
  const Problem<float> shorter = make_problem<float>(AttentionShape{1, 2, 1, 50, 49, 16, 16}, InputSet::kNormal, 95);
  Tensor<float> out(1, 2, 50, 16, Layout::kBHLD);
  const std::vector<float> untouched = out.data;
  expect_invalid_argument(
      [&] {
        attention(globals, p.q.cview(), p.k.cview(), p.v.cview(),
                  GlobalProjections<float>{p.q.cview(), shorter.k.cview(), p.v.cview()}, out.view);
      },
      "global.k.sizes[seq] = 49");
  expect_invalid_argument(
      [&] {
        attention(Global({60}), p.q.cview(), p.k.cview(), p.v.cview(),
                  GlobalProjections<float>{p.q.cview(), p.k.cview(), p.v.cview()}, out.view);
      },
      "tokens.back() = 60");
  EXPECT_EQ(out.data, untouched);
}

}  // namespace
}  // namespace attnkit::testing
