// attnkit::SlidingWindow (SPEC.md section 2): literal masks, conventions, plan properties,
// identities and the kernel against the float64 reference.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "attnkit/attention.hpp"
#include "attnkit/core/concepts.hpp"
#include "attnkit/core/errors.hpp"
#include "attnkit/core/rng.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/pattern/full.hpp"
#include "attnkit/pattern/sliding_window.hpp"
#include "attnkit/reference/attention.hpp"
#include "support/long_cases.hpp"
#include "support/pattern_checks.hpp"
#include "support/test_data.hpp"

namespace attnkit::testing {
namespace {

template <MaskedPattern P>
std::vector<std::vector<int>> mask_of(const P& pattern, index_t lq, index_t lk) {
  return mask_rows(pattern, AttentionShape{1, 1, 1, lq, lk, 1, 1});
}

using Rows = std::vector<std::vector<int>>;

TEST(SlidingWindowMask, SymmetricRadiusOne) {
  EXPECT_EQ(mask_of(SlidingWindow::symmetric(1), 4, 4), (Rows{{1, 1, 0, 0}, {1, 1, 1, 0}, {0, 1, 1, 1}, {0, 0, 1, 1}}));
}

TEST(SlidingWindowMask, CausalOnePastKey) {
  EXPECT_EQ(mask_of(SlidingWindow::causal(1), 4, 4), (Rows{{1, 0, 0, 0}, {1, 1, 0, 0}, {0, 1, 1, 0}, {0, 0, 1, 1}}));
}

TEST(SlidingWindowMask, AsymmetricLookAhead) {
  EXPECT_EQ(mask_of(SlidingWindow(0, 2), 4, 5),
            (Rows{{1, 1, 1, 0, 0}, {0, 1, 1, 1, 0}, {0, 0, 1, 1, 1}, {0, 0, 0, 1, 1}}));
}

TEST(SlidingWindowMask, MoreQueriesThanKeysAreNotShifted) {
  // Query i is aligned with key i: rows past the keys see only the band's overlap.
  EXPECT_EQ(mask_of(SlidingWindow::symmetric(1), 4, 2), (Rows{{1, 1}, {1, 1}, {0, 1}, {0, 0}}));
}

TEST(SlidingWindowMask, SinksAreCausalEvenBelowTheSinkCount) {
  // StreamingLLM: 2 sinks, 1 past key. Rows 0 and 1 sit below the sink count and still see
  // no later key; row 4 sees the sinks 0, 1 and its band 3, 4.
  EXPECT_EQ(mask_of(SlidingWindow::streaming(1, 2), 6, 6), (Rows{{1, 0, 0, 0, 0, 0},
                                                                 {1, 1, 0, 0, 0, 0},
                                                                 {1, 1, 1, 0, 0, 0},
                                                                 {1, 1, 1, 1, 0, 0},
                                                                 {1, 1, 0, 1, 1, 0},
                                                                 {1, 1, 0, 0, 1, 1}}));
  // Rows past the keys keep the sinks only (query i aligned with key i).
  EXPECT_EQ(mask_of(SlidingWindow::streaming(0, 1), 4, 2), (Rows{{1, 0}, {1, 1}, {1, 0}, {1, 0}}));
  // More sinks than keys: every key up to the row, as full causal attention.
  EXPECT_EQ(mask_of(SlidingWindow::streaming(0, 9), 3, 3), (Rows{{1, 0, 0}, {1, 1, 0}, {1, 1, 1}}));
}

TEST(SlidingWindowConventions, HelpersGiveRadii) {
  const SlidingWindow hf = SlidingWindow::from_hf_attention_window(512);
  EXPECT_EQ(hf.left(), 256);
  EXPECT_EQ(hf.right(), 256);
  const SlidingWindow paper = SlidingWindow::from_total_width(7);
  EXPECT_EQ(paper.left(), 3);
  EXPECT_EQ(paper.right(), 3);
  EXPECT_EQ(SlidingWindow::causal(5).left(), 5);
  EXPECT_EQ(SlidingWindow::causal(5).right(), 0);
}

TEST(SlidingWindowConventions, BadParametersAreRejected) {
  const auto expect_message = [](auto make, const std::string& fragment) { expect_invalid_argument(make, fragment); };
  expect_message([] { return SlidingWindow(-1, 2); }, "SlidingWindow: left = -1");
  expect_message([] { return SlidingWindow(2, -3); }, "SlidingWindow: right = -3");
  expect_message([] { return SlidingWindow::from_hf_attention_window(7); }, "attention_window = 7");
  expect_message([] { return SlidingWindow::from_hf_attention_window(0); }, "attention_window = 0");
  expect_message([] { return SlidingWindow::from_total_width(0); }, "width = 0");
  expect_message([] { return SlidingWindow::streaming(4, -1); }, "SlidingWindow::with_sinks: sinks = -1");
  expect_message([] { return SlidingWindow(4, 2).with_sinks(3); }, "SlidingWindow::with_sinks: right = 2");
  EXPECT_EQ(SlidingWindow(4, 2).with_sinks(0).sinks(), 0);  // no sinks is any window
  EXPECT_EQ(SlidingWindow::streaming(8, 4).left(), 8);
  EXPECT_EQ(SlidingWindow::streaming(8, 4).right(), 0);
  EXPECT_EQ(SlidingWindow::streaming(8, 4).sinks(), 4);
}

TEST(SlidingWindowPlan, AgreesWithPredicateOverRandomParameters) {
  for (std::uint64_t trial = 0; trial < 300; ++trial) {
    const auto draw = [&](std::uint64_t stream, index_t limit) {
      return static_cast<index_t>(mix64(trial * 16 + stream) % static_cast<std::uint64_t>(limit));
    };
    const AttentionShape shape{1, 1, 1, draw(1, 400), draw(2, 400), 4, 4};
    const TileShape tiles{1 + draw(3, 96), 1 + draw(4, 160)};
    const index_t left = draw(5, 4) == 0 ? SlidingWindow::kUnbounded : draw(6, 300);
    const index_t right = draw(7, 4) == 0 ? SlidingWindow::kUnbounded : draw(8, 300);
    expect_plan_matches_mask(SlidingWindow(left, right), shape, tiles);
    expect_plan_matches_mask(SlidingWindow::streaming(draw(9, 4) == 0 ? 0 : draw(10, 300), draw(11, 200)), shape,
                             tiles);
  }
}

TEST(SlidingWindowCost, AttendedPairsCountTheMask) {
  for (index_t lq : {0, 1, 9, 100})
    for (index_t lk : {0, 1, 9, 130})
      for (auto [left, right] : {std::pair<index_t, index_t>{0, 0}, {3, 0}, {2, 7}, {SlidingWindow::kUnbounded, 1}}) {
        const AttentionShape shape{1, 2, 1, lq, lk, 8, 8};
        EXPECT_EQ(SlidingWindow(left, right).cost(shape).attended_pairs,
                  count_mask_pairs(SlidingWindow(left, right), shape));
        if (right != 0) continue;
        for (index_t sinks : {1, 4, 200}) {
          const SlidingWindow streaming = SlidingWindow(left, 0).with_sinks(sinks);
          EXPECT_EQ(streaming.cost(shape).attended_pairs, count_mask_pairs(streaming, shape))
              << "Lq " << lq << " Lk " << lk << " left " << left << " sinks " << sinks;
        }
      }
}

TEST(SlidingWindowIdentity, RadiusZeroReturnsTheValueRow) {
  const AttentionShape s{1, 2, 2, 200, 200, 16, 12};
  const Problem<float> p = make_problem<float>(s, InputSet::kNormal, 21);
  Tensor<float> out(1, 2, 200, 12, Layout::kBHLD);
  attention(SlidingWindow::symmetric(0), p.q.cview(), p.k.cview(), p.v.cview(), out.view);
  EXPECT_EQ(out.data, p.v.data);
}

TEST(SlidingWindowIdentity, WideRadiusEqualsFullAttention) {
  const AttentionShape s{1, 2, 1, 300, 300, 32, 32};
  const Problem<float> p = make_problem<float>(s, InputSet::kNormal, 22);
  Tensor<float> window(1, 2, 300, 32, Layout::kBHLD), full = window, causal_window = window, causal = window;
  attention(SlidingWindow::symmetric(299), p.q.cview(), p.k.cview(), p.v.cview(), window.view);
  attention(Full{}, p.q.cview(), p.k.cview(), p.v.cview(), full.view);
  attention(SlidingWindow(SlidingWindow::kUnbounded, 0), p.q.cview(), p.k.cview(), p.v.cview(), causal_window.view);
  attention(Full{.causal = true}, p.q.cview(), p.k.cview(), p.v.cview(), causal.view);
  // Same attended sets; the two plans may cut tiles differently, so compare at rounding level.
  EXPECT_TRUE(all_close(window, full, Tolerance{1e-6, 1e-5}));
  EXPECT_TRUE(all_close(causal_window, causal, Tolerance{1e-6, 1e-5}));
}

TEST(SlidingWindowAttention, UnattendedNanValuesStayOutWhetherVIsPackedOrReadInPlace) {
  // The driver reads V in place when Dv is whole vectors (16, 64) and packs it otherwise (5);
  // either way value rows 40 and 150 (NaN) may reach only the rows whose window holds them.
  const index_t n = 300, radius = 8;
  for (index_t value_dim : {5, 16, 64})
    for (Layout layout : {Layout::kBHLD, Layout::kBLHD}) {
      SCOPED_TRACE(::testing::Message() << "Dv " << value_dim << (layout == Layout::kBLHD ? " BLHD" : " BHLD"));
      const AttentionShape s{1, 2, 2, n, n, 16, value_dim};
      Problem<float> p = make_problem<float>(s, InputSet::kNormal, 23, layout);
      for (index_t h = 0; h < 2; ++h)
        for (index_t poisoned : {40, 150})
          for (index_t d = 0; d < value_dim; ++d) p.v.at(0, h, poisoned, d) = std::numeric_limits<float>::quiet_NaN();
      Tensor<float> out(1, 2, n, value_dim, layout), ref = out;
      attention(SlidingWindow::symmetric(radius), p.q.cview(), p.k.cview(), p.v.cview(), out.view);
      reference::attention(SlidingWindow::symmetric(radius), p.q.cview(), p.k.cview(), p.v.cview(), ref.view);
      const double v_max = 5.0;  // N(0,1) values
      for (index_t h = 0; h < 2; ++h)
        for (index_t i = 0; i < n; ++i) {
          const bool attends_nan = std::abs(i - 40) <= radius || std::abs(i - 150) <= radius;
          for (index_t d = 0; d < value_dim; ++d) {
            if (attends_nan) {
              ASSERT_TRUE(std::isnan(out.at(0, h, i, d))) << "head " << h << " row " << i;
            } else {
              ASSERT_NEAR(out.at(0, h, i, d), ref.at(0, h, i, d), 2e-5 * v_max + 1e-4 * std::abs(ref.at(0, h, i, d)))
                  << "head " << h << " row " << i;
            }
          }
        }
    }
}

struct WindowCase {
  index_t left, right, sinks = 0;
};

class SlidingWindowAttention : public ::testing::TestWithParam<WindowCase> {};

TEST_P(SlidingWindowAttention, MatchesReference) {
  const SlidingWindow pattern = SlidingWindow(GetParam().left, GetParam().right).with_sinks(GetParam().sinks);
  for (index_t dim : {1, 16, 33, 64, 129})
    for (index_t n : {index_t{1}, index_t{2}, index_t{3}, index_t{7}, index_t{63}, index_t{64}, index_t{65},
                      index_t{127}, index_t{129}, kSweepLength}) {
      SCOPED_TRACE(::testing::Message() << "n " << n << " D " << dim);
      const AttentionShape shape{1, 1, 1, n, n, dim, dim};
      expect_matches_reference<float>(pattern, shape, InputSet::kNormal, static_cast<std::uint64_t>(n + dim));
      expect_matches_reference<double>(pattern, shape, InputSet::kNormal, static_cast<std::uint64_t>(n + dim));
    }
  for (InputSet set : {InputSet::kPeaky, InputSet::kOffset}) {
    expect_matches_reference<float>(pattern, AttentionShape{1, 1, 1, 300, 300, 64, 64}, set, 5);
    expect_matches_reference<double>(pattern, AttentionShape{1, 1, 1, 300, 300, 64, 64}, set, 5);
  }
  // Lq != Lk, Dv != D, grouped heads, [B, L, H, D] strides.
  expect_matches_reference<float>(pattern, AttentionShape{2, 4, 2, 150, 260, 32, 20}, InputSet::kNormal, 6,
                                  Layout::kBLHD);
  expect_matches_reference<float>(pattern, AttentionShape{2, 4, 2, 150, 260, 32, 32}, InputSet::kNormal, 8,
                                  Layout::kBLHD);  // V read in place through its strides
  expect_matches_reference<float>(pattern, AttentionShape{1, 2, 1, 260, 150, 17, 40}, InputSet::kNormal, 7);
}

INSTANTIATE_TEST_SUITE_P(Windows, SlidingWindowAttention,
                         ::testing::Values(WindowCase{0, 0}, WindowCase{1, 1}, WindowCase{5, 5}, WindowCase{64, 64},
                                           WindowCase{16, 0}, WindowCase{3, 40}, WindowCase{100, 0},
                                           WindowCase{200, 130}, WindowCase{16, 0, 4}, WindowCase{100, 0, 70}),
                         [](const ::testing::TestParamInfo<WindowCase>& param_info) {
                           return "Left" + std::to_string(param_info.param.left) + "Right" +
                                  std::to_string(param_info.param.right) +
                                  (param_info.param.sinks > 0 ? "Sinks" + std::to_string(param_info.param.sinks) : "");
                         });

}  // namespace
}  // namespace attnkit::testing
