// attnkit::Dilated (SPEC.md section 3): literal masks, residue-class order, plan properties,
// counts, identities, bad input and the kernel against the float64 reference.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "attnkit/attention.hpp"
#include "attnkit/core/errors.hpp"
#include "attnkit/core/options.hpp"
#include "attnkit/core/rng.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/pattern/dilated.hpp"
#include "attnkit/pattern/sliding_window.hpp"
#include "support/long_cases.hpp"
#include "support/pattern_checks.hpp"
#include "support/test_data.hpp"

namespace attnkit::testing {
namespace {

using Rows = std::vector<std::vector<int>>;

TEST(DilatedMask, DilationTwoRadiusOne) {
  // Row i attends i - 2, i, i + 2 inside the sequence.
  EXPECT_EQ(mask_rows(Dilated(1, 1, {2}), AttentionShape{1, 1, 1, 6, 6, 1, 1}), (Rows{{1, 0, 1, 0, 0, 0},
                                                                                      {0, 1, 0, 1, 0, 0},
                                                                                      {1, 0, 1, 0, 1, 0},
                                                                                      {0, 1, 0, 1, 0, 1},
                                                                                      {0, 0, 1, 0, 1, 0},
                                                                                      {0, 0, 0, 1, 0, 1}}));
}

TEST(DilatedMask, PerHeadDilationsAndAsymmetricRadii) {
  const Dilated pattern(0, 2, {1, 3});
  const AttentionShape shape{1, 2, 1, 4, 8, 1, 1};
  EXPECT_EQ(
      mask_rows(pattern, shape, 0),
      (Rows{{1, 1, 1, 0, 0, 0, 0, 0}, {0, 1, 1, 1, 0, 0, 0, 0}, {0, 0, 1, 1, 1, 0, 0, 0}, {0, 0, 0, 1, 1, 1, 0, 0}}));
  EXPECT_EQ(
      mask_rows(pattern, shape, 1),
      (Rows{{1, 0, 0, 1, 0, 0, 1, 0}, {0, 1, 0, 0, 1, 0, 0, 1}, {0, 0, 1, 0, 0, 1, 0, 0}, {0, 0, 0, 1, 0, 0, 1, 0}}));
}

TEST(DilatedMask, DilationOneIsTheSlidingWindow) {
  const AttentionShape shape{1, 1, 1, 40, 33, 1, 1};
  EXPECT_EQ(mask_rows(Dilated(3, 5, {1}), shape), mask_rows(SlidingWindow(3, 5), shape));
}

TEST(DilatedErrors, BadParametersAreRejected) {
  const auto expect_message = [](auto make, const std::string& fragment) { expect_invalid_argument(make, fragment); };
  expect_message([] { return Dilated(-1, 2, {1}); }, "Dilated: left = -1");
  expect_message([] { return Dilated(1, -2, {1}); }, "Dilated: right = -2");
  expect_message([] { return Dilated(1, 1, {}); }, "Dilated: dilations.size() = 0");
  expect_message([] { return Dilated(1, 1, {2, 0}); }, "Dilated: dilations[1] = 0");
  expect_message(
      [] {
        return Dilated(1, 1, {2, 3}).cost(AttentionShape{1, 3, 1, 9, 9, 4, 4});
      },
      "dilations.size() = 2");
}

TEST(ResidueClasses, PositionsAndRowsAreInverse) {
  for (index_t length : {0, 1, 5, 12, 13})
    for (index_t dilation : {1, 2, 3, 5, 20}) {
      const detail::ResidueClasses classes(length, dilation);
      index_t expected_position = 0;
      for (index_t c = 0; c < dilation; ++c)  // class by class, rows in increasing order
        for (index_t row = c; row < length; row += dilation, ++expected_position) {
          ASSERT_EQ(classes.position(row), expected_position) << length << " " << dilation;
          ASSERT_EQ(classes.row(expected_position), row);
        }
    }
}

TEST(DilatedPlan, AgreesWithMaskOverRandomParameters) {
  for (std::uint64_t trial = 0; trial < 300; ++trial) {
    const auto draw = [&](std::uint64_t stream, index_t limit) {
      return static_cast<index_t>(mix64(trial * 16 + stream) % static_cast<std::uint64_t>(limit));
    };
    const AttentionShape shape{1, 3, 3, draw(1, 300), draw(2, 300), 4, 4};
    const TileShape tiles{1 + draw(3, 64), 1 + draw(4, 130)};
    const index_t left = draw(5, 5) == 0 ? SlidingWindow::kUnbounded : draw(6, 40);
    const index_t right = draw(7, 5) == 0 ? SlidingWindow::kUnbounded : draw(8, 40);
    const Dilated pattern(left, right, {1 + draw(9, 8), 1 + draw(10, 3), 1 + draw(11, 40)});
    expect_plan_matches_mask(pattern, shape, tiles);
    if (trial % 10 == 0) expect_counts_match_mask(pattern, shape);
  }
}

TEST(DilatedCost, AttendedPairsCountTheMask) {
  for (index_t lq : {0, 1, 9, 100})
    for (index_t lk : {0, 1, 9, 130})
      for (const Dilated& pattern :
           {Dilated(0, 0, {3}), Dilated(2, 7, {1, 4}), Dilated(SlidingWindow::kUnbounded, 1, {2, 5})}) {
        const AttentionShape shape{1, 2, 1, lq, lk, 8, 8};
        EXPECT_EQ(pattern.cost(shape).attended_pairs, count_mask_pairs(pattern, shape));
      }
}

TEST(DilatedIdentity, EachResidueClassIsAWindowOnItsSubsequence) {
  // SPEC.md section 3: queries and keys of one class i mod d attend as an ordinary window.
  const index_t n = 203, dim = 16, dilation = 4;
  const AttentionShape shape{1, 1, 1, n, n, dim, dim};
  const Problem<double> p = make_problem<double>(shape, InputSet::kNormal, 31);
  Tensor<double> dilated(1, 1, n, dim, Layout::kBHLD);
  attention(Dilated(3, 5, {dilation}), p.q.cview(), p.k.cview(), p.v.cview(), dilated.view);
  for (index_t c = 0; c < dilation; ++c) {
    const index_t rows = (n - c + dilation - 1) / dilation;
    Problem<double> sub(AttentionShape{1, 1, 1, rows, rows, dim, dim}, Layout::kBHLD);
    for (index_t a = 0; a < rows; ++a)
      for (index_t d = 0; d < dim; ++d) {
        sub.q.at(0, 0, a, d) = p.q.data[static_cast<std::size_t>((c + a * dilation) * dim + d)];
        sub.k.at(0, 0, a, d) = p.k.data[static_cast<std::size_t>((c + a * dilation) * dim + d)];
        sub.v.at(0, 0, a, d) = p.v.data[static_cast<std::size_t>((c + a * dilation) * dim + d)];
      }
    Tensor<double> window(1, 1, rows, dim, Layout::kBHLD);
    attention(SlidingWindow(3, 5), sub.q.cview(), sub.k.cview(), sub.v.cview(), window.view);
    for (index_t a = 0; a < rows; ++a)
      for (index_t d = 0; d < dim; ++d) {
        ASSERT_NEAR(window.at(0, 0, a, d), dilated.at(0, 0, c + a * dilation, d), 1e-12)
            << "class " << c << " row " << a;
      }
  }
}

TEST(DilatedIdentity, SameResultForAnyThreadCount) {
  const AttentionShape s{2, 4, 2, 777, 777, 64, 64};
  const Problem<float> p = make_problem<float>(s, InputSet::kNormal, 32);
  const Dilated pattern(40, 40, {1, 2, 3, 8});
  Tensor<float> one(2, 4, 777, 64, Layout::kBHLD), two = one;
  attention(pattern, p.q.cview(), p.k.cview(), p.v.cview(), one.view, Options{.threads = 1});
  attention(pattern, p.q.cview(), p.k.cview(), p.v.cview(), two.view, Options{.threads = 2});
  EXPECT_EQ(one.data, two.data);
}

TEST(DilatedAttention, MatchesReference) {
  for (const Dilated& pattern :
       {Dilated(0, 0, {2}), Dilated(4, 4, {3}), Dilated(64, 64, {2}), Dilated(17, 0, {5}), Dilated(100, 30, {7})}) {
    for (index_t n : {index_t{1}, index_t{7}, index_t{65}, index_t{300}, kSweepLength})
      for (index_t dim : {16, 64}) {
        SCOPED_TRACE(::testing::Message() << "n " << n << " D " << dim << " d " << pattern.dilations()[0]);
        const AttentionShape shape{1, 1, 1, n, n, dim, dim};
        expect_matches_reference<float>(pattern, shape, InputSet::kNormal, static_cast<std::uint64_t>(n + dim));
        expect_matches_reference<double>(pattern, shape, InputSet::kNormal, static_cast<std::uint64_t>(n + dim));
      }
  }
  const Dilated mixed(20, 12, {1, 2, 2, 5});
  for (InputSet set : {InputSet::kPeaky, InputSet::kOffset}) {
    expect_matches_reference<float>(mixed, AttentionShape{1, 4, 4, 300, 300, 64, 64}, set, 5);
    expect_matches_reference<double>(mixed, AttentionShape{1, 4, 4, 300, 300, 64, 64}, set, 5);
  }
  // Lq != Lk, Dv != D, GQA groups mixing dilations (K/V packed per distinct dilation), BLHD.
  expect_matches_reference<float>(mixed, AttentionShape{2, 4, 2, 150, 260, 32, 20}, InputSet::kNormal, 6,
                                  Layout::kBLHD);
  expect_matches_reference<float>(mixed, AttentionShape{1, 4, 1, 260, 150, 17, 40}, InputSet::kNormal, 7);
}

}  // namespace
}  // namespace attnkit::testing
