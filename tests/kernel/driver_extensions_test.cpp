// The tiled driver's extensions for kinds whose positions are occurrences of rows and that take
// their results themselves (OccurrencePlan, then kernel::merge_partial) and that add a finite
// score bias (BiasedPlan), exercised by a plan written here: R repeated rounds of full
// attention with a self penalty, merged by log-sum-exp, against sums written from SPEC.md
// section 0. Also the driver's choice of computing a query tile by a RowSplittingPlan's runs.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "attnkit/attention.hpp"
#include "attnkit/core/options.hpp"
#include "attnkit/core/plan_call.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/kernel/lse_merge.hpp"
#include "attnkit/pattern/dilated.hpp"
#include "attnkit/pattern/full.hpp"
#include "attnkit/pattern/global.hpp"
#include "attnkit/pattern/sliding_window.hpp"
#include "attnkit/pattern/union.hpp"
#include "support/accuracy.hpp"
#include "support/driver_call.hpp"
#include "support/test_data.hpp"

namespace attnkit {
namespace {

using testing::InputSet;
using testing::Layout;
using testing::Tensor;

/// Positions p in [0, R n) stand for row p % n in round p / n (each row R times, like LSH's
/// occurrences); a query position attends every key position of its own round, and the key at
/// its own row gets kPenalty added. Every tile is masked, so the bias reaches every score.
/// Results go to per-position scratch [B, H, R n, Dv] and lse [B, H, R n].
template <class T>
class RepeatedRoundsPlan {
 public:
  using value_type = T;
  static constexpr double kPenalty = -1e5;

  RepeatedRoundsPlan(index_t rounds, const AttentionShape& shape, const TileShape& tiles)
      : rounds_(rounds),
        n_(shape.q_len),
        heads_(shape.q_heads),
        value_dim_(shape.value_dim),
        key_rows_(tiles.key_rows),
        results_(static_cast<std::size_t>(shape.batch * shape.q_heads * rounds * shape.q_len * shape.value_dim)),
        lses_(static_cast<std::size_t>(shape.batch * shape.q_heads * rounds * shape.q_len)) {}

  index_t query_positions() const { return rounds_ * n_; }
  index_t key_positions() const { return rounds_ * n_; }
  index_t query_row(index_t /*head*/, index_t position) const { return position % n_; }
  index_t key_row(index_t /*head*/, index_t position) const { return position % n_; }
  index_t key_order(index_t /*head*/) const { return 0; }

  template <class Visit>
  void for_each_key_tile(index_t /*head*/, index_t q_begin, index_t q_end, Visit&& visit) const {
    const index_t begin = q_begin / n_ * n_, end = ((q_end - 1) / n_ + 1) * n_;  // the rounds met
    for (index_t first = begin; first < end; first = (first / key_rows_ + 1) * key_rows_) {
      visit(KeyTile{first, std::min(end, (first / key_rows_ + 1) * key_rows_), true});
    }
  }
  template <class S>
  void exclude(index_t /*head*/, index_t position, const KeyTile& tile, S* scores) const {
    const index_t round = position / n_;
    for (index_t j = tile.begin; j < tile.end; ++j) {
      if (j / n_ != round) scores[j - tile.begin] = -std::numeric_limits<S>::infinity();
    }
  }
  template <class S>
  void add_bias(index_t /*head*/, index_t position, const KeyTile& tile, S* scores, S unit) const {
    for (index_t j = tile.begin; j < tile.end; ++j) {
      if (j % n_ == position % n_) scores[j - tile.begin] += unit * static_cast<S>(kPenalty);
    }
  }
  void sink(index_t b, index_t h, index_t position, const T* row, T lse) const {
    std::copy(row, row + value_dim_, results_.data() + slot(b, h, position) * value_dim_);
    lses_[static_cast<std::size_t>(slot(b, h, position))] = lse;
  }

  /// out and lse of row i: the rounds merged by log-sum-exp, round 0 first.
  void merge(index_t b, index_t h, index_t i, T* out, T* lse) const {
    std::fill(out, out + value_dim_, T(0));
    T merged = -std::numeric_limits<T>::infinity();
    for (index_t r = 0; r < rounds_; ++r) {
      const index_t part = slot(b, h, r * n_ + i);
      merged = kernel::merge_partial<T>(out, merged, results_.data() + part * value_dim_,
                                        lses_[static_cast<std::size_t>(part)], value_dim_);
    }
    *lse = merged;
  }

 private:
  index_t rounds_, n_, heads_, value_dim_, key_rows_;
  index_t slot(index_t b, index_t h, index_t position) const { return (b * heads_ + h) * rounds_ * n_ + position; }

  mutable std::vector<T> results_;  // [B, H, R n, Dv], written by sink
  mutable std::vector<T> lses_;     // [B, H, R n]
};

static_assert(OccurrencePlan<RepeatedRoundsPlan<float>> && BiasedPlan<RepeatedRoundsPlan<float>>);
static_assert(!OccurrencePlan<Full::Plan> && !BiasedPlan<Full::Plan>);

/// Runs the plan through the driver and merges the rounds into out [B, H, n, Dv], lse.
template <class T>
void run_rounds(index_t rounds, const testing::Problem<T>& p, Tensor<T>& out, Tensor<T>& lse, int threads) {
  const AttentionShape& s = p.shape;
  const TileShape tiles = TileShape{};
  const RepeatedRoundsPlan<T> plan(rounds, s, tiles);
  kernel::run_tiled(testing::driver_call(p, out.view, threads), plan, tiles);
  for (index_t b = 0; b < s.batch; ++b)
    for (index_t h = 0; h < s.q_heads; ++h)
      for (index_t i = 0; i < s.q_len; ++i) plan.merge(b, h, i, out.view.row(b, h, i), lse.view.row(b, h, i));
}

/// Section 0 with mu_ij = R and logits sigma <q_i, k_j> - 1e5 [j = i], in double.
template <class T>
void expected_rounds(index_t rounds, const testing::Problem<T>& p, Tensor<double>& out, Tensor<double>& lse) {
  const AttentionShape& s = p.shape;
  const double sigma = 1 / std::sqrt(static_cast<double>(s.head_dim));
  for (index_t b = 0; b < s.batch; ++b)
    for (index_t h = 0; h < s.q_heads; ++h)
      for (index_t i = 0; i < s.q_len; ++i) {
        std::vector<double> logits(static_cast<std::size_t>(s.kv_len));
        double top = -std::numeric_limits<double>::infinity();
        for (index_t j = 0; j < s.kv_len; ++j) {
          double dot = 0;
          for (index_t d = 0; d < s.head_dim; ++d)
            dot += static_cast<double>(p.q.view(b, h, i, d)) * p.k.view(b, h / s.group_size(), j, d);
          logits[static_cast<std::size_t>(j)] = sigma * dot + (j == i ? RepeatedRoundsPlan<T>::kPenalty : 0.0);
          top = std::max(top, logits[static_cast<std::size_t>(j)]);
        }
        double z = 0;
        std::vector<double> acc(static_cast<std::size_t>(s.value_dim), 0.0);
        for (index_t j = 0; j < s.kv_len; ++j) {
          const double w = static_cast<double>(rounds) * std::exp(logits[static_cast<std::size_t>(j)] - top);
          z += w;
          for (index_t d = 0; d < s.value_dim; ++d)
            acc[static_cast<std::size_t>(d)] += w * p.v.view(b, h / s.group_size(), j, d);
        }
        for (index_t d = 0; d < s.value_dim; ++d) out.at(b, h, i, d) = acc[static_cast<std::size_t>(d)] / z;
        lse.at(b, h, i, 0) = top + std::log(z);
      }
}

template <class T>
void expect_rounds_match(index_t rounds, const AttentionShape& s, Layout layout) {
  const auto p = testing::make_problem<T>(s, InputSet::kNormal, 40 + static_cast<std::uint64_t>(rounds), layout);
  Tensor<T> out(s.batch, s.q_heads, s.q_len, s.value_dim, Layout::kBHLD),
      lse(s.batch, s.q_heads, s.q_len, 1, Layout::kBHLD);
  Tensor<double> ref(s.batch, s.q_heads, s.q_len, s.value_dim, Layout::kBHLD),
      ref_lse(s.batch, s.q_heads, s.q_len, 1, Layout::kBHLD);
  run_rounds<T>(rounds, p, out, lse, 0);
  expected_rounds<T>(rounds, p, ref, ref_lse);
  const double v_max = testing::max_abs(p.v);
  // float: SPEC.md section 11's bounds; the 1e5 penalty is exact in float and its exp is 0.
  const double tol = std::is_same_v<T, float> ? 2e-5 : 1e-12;
  for (index_t b = 0; b < s.batch; ++b)
    for (index_t h = 0; h < s.q_heads; ++h)
      for (index_t i = 0; i < s.q_len; ++i) {
        for (index_t d = 0; d < s.value_dim; ++d) {
          const double r = ref.at(b, h, i, d);
          ASSERT_NEAR(out.at(b, h, i, d), r, tol * v_max + 5 * tol * std::abs(r))
              << b << " " << h << " " << i << " " << d;
        }
        ASSERT_NEAR(lse.at(b, h, i, 0), ref_lse.at(b, h, i, 0), tol * (1 + std::abs(ref_lse.at(b, h, i, 0))));
      }
}

TEST(DriverExtensions, RepeatedRoundsWithSelfPenaltyMergeToOneSoftmax) {
  for (index_t rounds : {1, 2, 3}) {
    for (index_t n : {1, 2, 31, 100, 257}) {
      SCOPED_TRACE(testing::to_string(InputSet::kNormal) + " R " + std::to_string(rounds) + " n " + std::to_string(n));
      expect_rounds_match<float>(rounds, {2, 2, 2, n, n, 16, 16}, Layout::kBHLD);
      expect_rounds_match<double>(rounds, {1, 4, 2, n, n, 17, 9}, Layout::kBLHD);
    }
  }
}

/// A single position has only itself: the penalty is a bias, not an exclusion, so the row
/// still attends it (o = v, lse = logit - 1e5).
TEST(DriverExtensions, BiasIsNotAnExclusion) {
  const AttentionShape s{1, 1, 1, 1, 1, 8, 8};
  const auto p = testing::make_problem<double>(s, InputSet::kNormal, 50);
  Tensor<double> out(1, 1, 1, 8, Layout::kBHLD), lse(1, 1, 1, 1, Layout::kBHLD);
  run_rounds<double>(2, p, out, lse, 1);
  for (index_t d = 0; d < 8; ++d) EXPECT_DOUBLE_EQ(out.at(0, 0, 0, d), p.v.view(0, 0, 0, d));
  double dot = 0;
  for (index_t d = 0; d < 8; ++d) dot += p.q.view(0, 0, 0, d) * p.k.view(0, 0, 0, d);
  EXPECT_NEAR(lse.at(0, 0, 0, 0), dot / std::sqrt(8.0) - 1e5 + std::log(2.0), 1e-9);
}

TEST(DriverExtensions, BitwiseIdenticalAcrossThreadCounts) {
  const AttentionShape s{1, 4, 4, 600, 600, 64, 64};
  const auto p = testing::make_problem<float>(s, InputSet::kNormal, 51);
  Tensor<float> one(1, 4, 600, 64, Layout::kBHLD), two = one, lse_one(1, 4, 600, 1, Layout::kBHLD), lse_two = lse_one;
  run_rounds<float>(3, p, one, lse_one, 1);
  run_rounds<float>(3, p, two, lse_two, 2);
  EXPECT_EQ(one.data, two.data);
  EXPECT_EQ(lse_one.data, lse_two.data);
}

TEST(DriverExtensions, TileRunsAreTakenWhenTheyAreLessWork) {
  const AttentionShape s{1, 1, 1, 1000, 1000, 16, 16};
  const TileShape tiles{32, 256};
  // Longformer: the global row alone (4 padded rows over 1000 keys) and 31 rows over a band,
  // instead of 32 rows over every key.
  const auto longformer = Union{SlidingWindow::symmetric(8), Global({0})}.plan(s, tiles);
  EXPECT_TRUE(kernel::detail::tile_work(longformer, 0, 0, 32).by_runs);
  EXPECT_LT(kernel::detail::tile_work(longformer, 0, 0, 32).work, kernel::detail::estimated_work(longformer, 0, 0, 32));
  EXPECT_FALSE(kernel::detail::tile_work(longformer, 0, 32, 64).by_runs) << "no global row, one run";
  // Rows alternating global and not: 32 one-row runs, each padded to a row block, would
  // double the work of the global rows.
  std::vector<index_t> even;
  for (index_t i = 0; i < 32; i += 2) even.push_back(i);
  const auto alternating = Global(even).plan(s, tiles);
  EXPECT_FALSE(kernel::detail::tile_work(alternating, 0, 0, 32).by_runs);
}

TEST(DriverExtensions, TileRunsGiveTheSameResultForAnyThreadCount) {
  const AttentionShape s{1, 4, 2, 900, 900, 64, 64};
  const auto p = testing::make_problem<float>(s, InputSet::kNormal, 52);
  const Union longformer{Dilated::symmetric(30, {1, 2, 3, 1}), Global({0, 3, 64, 500})};
  Tensor<float> one(1, 4, 900, 64, Layout::kBHLD), two = one;
  attention(longformer, p.q.cview(), p.k.cview(), p.v.cview(), one.view, Options{.threads = 1});
  attention(longformer, p.q.cview(), p.k.cview(), p.v.cview(), two.view, Options{.threads = 2});
  EXPECT_EQ(one.data, two.data);
}

TEST(MergePartial, CombinesByLogSumExpAndSkipsEmptyParts) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  // Parts over disjoint keys: weights e^1 (value 2) and e^2 + e^0 (mean value 5), then an
  // empty part whose NaN row must not be read.
  double out = nan;  // a running result of -inf is replaced, not read
  double lse = kernel::merge_partial<double>(&out, -inf, std::vector<double>{2.0}.data(), 1.0, 1);
  lse = kernel::merge_partial<double>(&out, lse, std::vector<double>{5.0}.data(), std::log(std::exp(2.0) + 1.0), 1);
  lse = kernel::merge_partial<double>(&out, lse, std::vector<double>{nan}.data(), -inf, 1);
  const double z = std::exp(1.0) + std::exp(2.0) + 1.0;
  EXPECT_NEAR(lse, std::log(z), 1e-15);
  EXPECT_NEAR(out, (std::exp(1.0) * 2 + (std::exp(2.0) + 1.0) * 5) / z, 1e-14);
  // Every part empty: the running result stays as the caller started it, never NaN.
  double zero = 0;
  EXPECT_EQ(kernel::merge_partial<double>(&zero, -inf, &nan, -inf, 1), -inf);
  EXPECT_EQ(zero, 0.0);
  // Large lse values of opposite sign do not overflow: the larger part dominates.
  double big = 1;
  EXPECT_NEAR(kernel::merge_partial<double>(&big, 1e4, std::vector<double>{3.0}.data(), -1e4, 1), 1e4, 1e-9);
  EXPECT_EQ(big, 1.0);
}

}  // namespace
}  // namespace attnkit
