// attnkit::attention with attnkit::Full against the float64 reference (SPEC.md sections 1, 11).

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "attnkit/attention.hpp"
#include "attnkit/core/options.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/core/tensor_view.hpp"
#include "attnkit/eigen.hpp"
#include "attnkit/pattern/full.hpp"
#include "attnkit/reference/attention.hpp"
#include "support/accuracy.hpp"
#include "support/long_cases.hpp"
#include "support/pattern_checks.hpp"
#include "support/test_data.hpp"

namespace attnkit::testing {
namespace {

struct Case {
  AttentionShape shape;
  bool causal = false;
  InputSet set = InputSet::kNormal;
  Layout layout = Layout::kBHLD;
  std::uint64_t seed = 1;

  std::string name() const {
    const auto& s = shape;
    return "B" + std::to_string(s.batch) + "Hq" + std::to_string(s.q_heads) + "Hk" + std::to_string(s.kv_heads) + "Lq" +
           std::to_string(s.q_len) + "Lk" + std::to_string(s.kv_len) + "D" + std::to_string(s.head_dim) + "Dv" +
           std::to_string(s.value_dim) + (causal ? "Causal" : "Full") + to_string(set) +
           (layout == Layout::kBHLD ? "BHLD" : "BLHD");
  }
};

AttentionShape self_attention(index_t n, index_t dim) { return AttentionShape{1, 1, 1, n, n, dim, dim}; }

const std::vector<index_t> kDims = {1, 3, 7, 8, 15, 16, 17, 31, 33, 63, 64, 65, 127, 128, 129};

/// Every D of SPEC.md section 11 against the short lengths, both masks, all input sets.
std::vector<Case> shape_sweep() {
  std::vector<Case> cases;
  for (index_t dim : kDims)
    for (index_t n : {1, 2, 3, 7, 63, 64, 65, 127, 129})
      for (bool causal : {false, true})
        for (InputSet set : {InputSet::kNormal, InputSet::kPeaky, InputSet::kOffset})
          cases.push_back(
              Case{self_attention(n, dim), causal, set, Layout::kBHLD, static_cast<std::uint64_t>(n * dim)});
  return cases;
}

/// The long lengths of SPEC.md section 11 at a few head dims.
std::vector<Case> long_sweep() {
  std::vector<Case> cases;
  for (bool causal : {false, true}) {
    for (index_t dim : {1, 17, 64, 129})
      for (InputSet set : {InputSet::kNormal, InputSet::kPeaky})
        cases.push_back(Case{self_attention(kSweepLength, dim), causal, set});
    cases.push_back(Case{self_attention(kLongReferenceLength, 64), causal, InputSet::kNormal});
  }
  return cases;
}

/// Lq != Lk (bottom-right causal, empty leading rows when Lq > Lk), Dv != D.
std::vector<Case> rectangular_sweep() {
  std::vector<Case> cases;
  const std::pair<index_t, index_t> lengths[] = {{65, 200}, {200, 65}, {1, 129}, {129, 1}, {300, 300}, {7, 0}};
  const std::pair<index_t, index_t> dims[] = {{64, 17}, {3, 129}, {33, 8}, {16, 16}};
  for (auto [lq, lk] : lengths)
    for (auto [dim, value_dim] : dims)
      for (bool causal : {false, true})
        cases.push_back(Case{AttentionShape{1, 1, 1, lq, lk, dim, value_dim}, causal, InputSet::kNormal});
  return cases;
}

/// B x H > 1 with distinct data per head, grouped-query heads, [B, L, H, D] strides.
std::vector<Case> multi_head_sweep() {
  std::vector<Case> cases;
  for (index_t kv_heads : {4, 2, 1})
    for (Layout layout : {Layout::kBHLD, Layout::kBLHD})
      for (bool causal : {false, true})
        cases.push_back(Case{AttentionShape{2, 4, kv_heads, 150, 170, 32, 24}, causal, InputSet::kNormal, layout, 7});
  return cases;
}

template <class T>
void expect_full_matches_reference(const Case& c) {
  expect_matches_reference<T>(Full{.causal = c.causal}, c.shape, c.set, c.seed, c.layout);
}

class FullAttentionFloat : public ::testing::TestWithParam<Case> {};
class FullAttentionDouble : public ::testing::TestWithParam<Case> {};

TEST_P(FullAttentionFloat, MatchesReference) { expect_full_matches_reference<float>(GetParam()); }
TEST_P(FullAttentionDouble, MatchesReference) { expect_full_matches_reference<double>(GetParam()); }

const auto kCaseName = [](const ::testing::TestParamInfo<Case>& info) { return info.param.name(); };
INSTANTIATE_TEST_SUITE_P(Shapes, FullAttentionFloat, ::testing::ValuesIn(shape_sweep()), kCaseName);
INSTANTIATE_TEST_SUITE_P(Shapes, FullAttentionDouble, ::testing::ValuesIn(shape_sweep()), kCaseName);
INSTANTIATE_TEST_SUITE_P(Long, FullAttentionFloat, ::testing::ValuesIn(long_sweep()), kCaseName);
INSTANTIATE_TEST_SUITE_P(Long, FullAttentionDouble, ::testing::ValuesIn(long_sweep()), kCaseName);
INSTANTIATE_TEST_SUITE_P(Rectangular, FullAttentionFloat, ::testing::ValuesIn(rectangular_sweep()), kCaseName);
INSTANTIATE_TEST_SUITE_P(Rectangular, FullAttentionDouble, ::testing::ValuesIn(rectangular_sweep()), kCaseName);
INSTANTIATE_TEST_SUITE_P(MultiHead, FullAttentionFloat, ::testing::ValuesIn(multi_head_sweep()), kCaseName);
INSTANTIATE_TEST_SUITE_P(MultiHead, FullAttentionDouble, ::testing::ValuesIn(multi_head_sweep()), kCaseName);

TEST(FullAttention, EmptyRowsGiveZerosAndMinusInfinity) {
  // Causal with Lq = 10 > Lk = 4: query i sits at key position i - 6, so rows 0..5 see no key.
  const AttentionShape s{1, 1, 1, 10, 4, 8, 8};
  const Problem<float> p = make_problem<float>(s, InputSet::kNormal, 3);
  Tensor<float> out(1, 1, 10, 8, Layout::kBHLD), lse(1, 1, 10, 1, Layout::kBHLD);
  attention(Full{.causal = true}, p.q.cview(), p.k.cview(), p.v.cview(), out.view, lse.view);
  for (index_t i = 0; i < 10; ++i) {
    const bool empty = i < 6;
    EXPECT_EQ(std::isinf(lse.at(0, 0, i, 0)) && lse.at(0, 0, i, 0) < 0, empty) << "row " << i;
    for (index_t d = 0; d < 8; ++d) {
      if (empty) {
        EXPECT_EQ(out.at(0, 0, i, d), 0.0f) << "row " << i;
      }
      EXPECT_TRUE(std::isfinite(out.at(0, 0, i, d))) << "row " << i;
    }
  }
}

TEST(FullAttention, NoKeysGivesZeros) {
  const AttentionShape s{2, 2, 1, 5, 0, 4, 3};
  const Problem<double> p = make_problem<double>(s, InputSet::kNormal, 4);
  Tensor<double> out(2, 2, 5, 3, Layout::kBHLD), lse(2, 2, 5, 1, Layout::kBHLD);
  std::fill(out.data.begin(), out.data.end(), 7.0);
  attention(Full{}, p.q.cview(), p.k.cview(), p.v.cview(), out.view, lse.view);
  for (double x : out.data) EXPECT_EQ(x, 0.0);
  for (double x : lse.data) EXPECT_EQ(x, -std::numeric_limits<double>::infinity());
}

TEST(FullAttention, NaNInKeysAndValuesNeverReadStaysOut) {
  // Causal self-attention, n = 200: rows i < j never attend key j. Key/value rows 100 (inside
  // the diagonal tile of the first 128 keys) and 150 are poisoned; rows before them must be
  // exact, rows that attend them must show the NaN.
  const index_t n = 200, dim = 16;
  const AttentionShape s = self_attention(n, dim);
  Problem<float> p = make_problem<float>(s, InputSet::kNormal, 5);
  for (index_t poisoned : {100, 150})
    for (index_t d = 0; d < dim; ++d) {
      p.k.at(0, 0, poisoned, d) = std::numeric_limits<float>::quiet_NaN();
      p.v.at(0, 0, poisoned, d) = std::numeric_limits<float>::quiet_NaN();
    }
  Tensor<float> out(1, 1, n, dim, Layout::kBHLD), ref = out;
  attention(Full{.causal = true}, p.q.cview(), p.k.cview(), p.v.cview(), out.view);
  reference::attention(Full{.causal = true}, p.q.cview(), p.k.cview(), p.v.cview(), ref.view);
  const double v_max = 5.0;  // N(0,1) values; only the unpoisoned rows are compared
  for (index_t i = 0; i < n; ++i)
    for (index_t d = 0; d < dim; ++d) {
      if (i < 100) {
        EXPECT_NEAR(out.at(0, 0, i, d), ref.at(0, 0, i, d), 2e-5 * v_max + 1e-4 * std::abs(ref.at(0, 0, i, d)))
            << "row " << i;
      } else {
        EXPECT_TRUE(std::isnan(out.at(0, 0, i, d))) << "row " << i << " attends a NaN key";
      }
    }
}

TEST(FullAttention, LargeLogitsDoNotOverflow) {
  // scale = 1e3 turns N(0,1) dot products into logits of order +-1e4; exp would overflow
  // without the running max.
  const AttentionShape s = self_attention(300, 32);
  const Problem<float> p = make_problem<float>(s, InputSet::kNormal, 6);
  Tensor<float> out(1, 1, 300, 32, Layout::kBHLD), ref = out;
  const Options options{.scale = 1e3};
  attention(Full{}, p.q.cview(), p.k.cview(), p.v.cview(), out.view, options);
  reference::attention(Full{}, p.q.cview(), p.k.cview(), p.v.cview(), ref.view, options);
  // Near one-hot rows: the output is the argmax key's value row up to float rounding of logits
  // ~1e4 (ulp 1e-3), which can reorder near-ties; compare to the naive float yardstick.
  Tensor<float> naive = out;
  reference::detail::dense_attention<float, float>(Full{}, p.q.cview(), p.k.cview(), p.v.cview(), naive.view, nullptr,
                                                   options);
  EXPECT_LE(max_abs_difference(out, ref), 2 * max_abs_difference(naive, ref) + 1e-6);
  for (float x : out.data) EXPECT_TRUE(std::isfinite(x));
}

TEST(FullAttention, ScaleOptionIsSigma) {
  // sigma = 0 makes every logit 0: each row is the mean of the attended value rows.
  const AttentionShape s = self_attention(37, 5);
  const Problem<double> p = make_problem<double>(s, InputSet::kNormal, 8);
  Tensor<double> out(1, 1, 37, 5, Layout::kBHLD);
  attention(Full{.causal = true}, p.q.cview(), p.k.cview(), p.v.cview(), out.view, Options{.scale = 0.0});
  for (index_t i = 0; i < 37; ++i)
    for (index_t d = 0; d < 5; ++d) {
      double mean = 0;
      for (index_t j = 0; j <= i; ++j) mean += p.v.data[static_cast<std::size_t>(j * 5 + d)];
      mean /= static_cast<double>(i + 1);
      EXPECT_NEAR(out.at(0, 0, i, d), mean, 1e-13) << "row " << i;
    }
}

TEST(FullAttention, BitwiseIdenticalAcrossThreadCounts) {
  for (bool causal : {false, true}) {
    const AttentionShape s{2, 4, 2, 700, 650, 48, 40};
    const Problem<float> p = make_problem<float>(s, InputSet::kNormal, 9);
    Tensor<float> one(2, 4, 700, 40, Layout::kBHLD), two = one;
    Tensor<float> lse_one(2, 4, 700, 1, Layout::kBHLD), lse_two = lse_one;
    attention(Full{.causal = causal}, p.q.cview(), p.k.cview(), p.v.cview(), one.view, lse_one.view,
              Options{.threads = 1});
    attention(Full{.causal = causal}, p.q.cview(), p.k.cview(), p.v.cview(), two.view, lse_two.view,
              Options{.threads = 2});
    EXPECT_EQ(std::memcmp(one.data.data(), two.data.data(), one.data.size() * sizeof(float)), 0);
    EXPECT_EQ(std::memcmp(lse_one.data.data(), lse_two.data.data(), lse_one.data.size() * sizeof(float)), 0);
  }
}

TEST(FullAttention, CallsFromInsideACallersParallelRegionRunSerially) {
  // A caller that parallelises over its own work calls attnkit from each thread; attnkit must
  // not nest a region and must give the same bits as a top-level call.
  const AttentionShape s{1, 2, 2, 300, 300, 32, 32};
  const Problem<float> p = make_problem<float>(s, InputSet::kNormal, 11);
  Tensor<float> expected(1, 2, 300, 32, Layout::kBHLD), first = expected, second = expected;
  attention(Full{}, p.q.cview(), p.k.cview(), p.v.cview(), expected.view);
  Tensor<float>* outputs[] = {&first, &second};
#pragma omp parallel for num_threads(2)
  for (int t = 0; t < 2; ++t) attention(Full{}, p.q.cview(), p.k.cview(), p.v.cview(), outputs[t]->view);
  EXPECT_EQ(first.data, expected.data);
  EXPECT_EQ(second.data, expected.data);
}

TEST(FullAttention, LseOverloadWritesTheSameOutput) {
  const AttentionShape s = self_attention(130, 24);
  const Problem<float> p = make_problem<float>(s, InputSet::kNormal, 10);
  Tensor<float> plain(1, 1, 130, 24, Layout::kBHLD), with_lse = plain, lse(1, 1, 130, 1, Layout::kBHLD);
  attention(Full{}, p.q.cview(), p.k.cview(), p.v.cview(), plain.view);
  attention(Full{}, p.q.cview(), p.k.cview(), p.v.cview(), with_lse.view, lse.view);
  EXPECT_EQ(plain.data, with_lse.data);
}

TEST(FullAttention, EigenOverloadMatchesTheTensorViewCall) {
  const index_t lq = 90, lk = 140, dim = 20, value_dim = 12;
  RowMatrix<float> q = RowMatrix<float>::Random(lq, dim), k = RowMatrix<float>::Random(lk, dim);
  RowMatrix<float> v = RowMatrix<float>::Random(lk, value_dim), out(lq, value_dim), expected(lq, value_dim);
  attention(Full{.causal = true}, q, k, v, out);
  reference::attention(Full{.causal = true}, TensorView<const float>(q.data(), {1, 1, lq, dim}, {0, 0, dim, 1}),
                       TensorView<const float>(k.data(), {1, 1, lk, dim}, {0, 0, dim, 1}),
                       TensorView<const float>(v.data(), {1, 1, lk, value_dim}, {0, 0, value_dim, 1}),
                       TensorView<float>(expected.data(), {1, 1, lq, value_dim}, {0, 0, value_dim, 1}));
  EXPECT_LE((out - expected).cwiseAbs().maxCoeff(), 2e-5f + 1e-4f * expected.cwiseAbs().maxCoeff());

  // double, with column-major inputs (Eigen copies them to row-major temporaries).
  const Eigen::MatrixXd qd = q.cast<double>(), kd = k.cast<double>(), vd = v.cast<double>();
  RowMatrix<double> out_d(lq, value_dim);
  attention(Full{.causal = true}, qd, kd, vd, out_d);
  EXPECT_LE((out_d - expected.cast<double>()).cwiseAbs().maxCoeff(), 1e-6);
}

}  // namespace
}  // namespace attnkit::testing
