// Linformer (SPEC.md section 8): the executable plan against its float64 reference, the
// metamorphic identities, projections, key padding, thread counts and every error path.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "attnkit/attention.hpp"
#include "attnkit/core/concepts.hpp"
#include "attnkit/core/cost.hpp"
#include "attnkit/core/errors.hpp"
#include "attnkit/core/options.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/core/tensor_view.hpp"
#include "attnkit/pattern/full.hpp"
#include "attnkit/pattern/linformer.hpp"
#include "attnkit/pattern/per_head.hpp"
#include "attnkit/reference/attention.hpp"
#include "support/accuracy.hpp"
#include "support/long_cases.hpp"
#include "support/pattern_checks.hpp"
#include "support/test_data.hpp"

namespace attnkit {
namespace {

using testing::InputSet;
using testing::kLongReferenceLength;
using testing::Layout;
using testing::Tensor;

static_assert(AttentionPattern<Linformer>);
static_assert(PlansFromCall<Linformer, float> && PlansFromCall<Linformer, double>);
static_assert(!PlansFromShape<Linformer, float>, "Linformer plans from the call's data");
static_assert(!MaskedPattern<Linformer>);
static_assert(reference::SelfReferencedPattern<Linformer> && reference::ReferencedPattern<Linformer>);
static_assert(KeyPaddedPattern<Linformer> && !KeyPaddedPattern<Full>);
static_assert(ExecutablePlan<kernel::LinformerPlan<float, Full::Plan>, float> &&
              !KeyTilePlan<kernel::LinformerPlan<float, Full::Plan>>);

/// max |F V| over every (batch, kv head, projected row, value column), computed from the
/// projection in double: the scale of Linformer's output (SPEC.md section 11), which is not a
/// convex combination of V rows.
template <class T>
double max_projected_value(const Linformer& lin, const Tensor<T>& v, const Options& options = {}) {
  double worst = 0;
  const TensorView<T>& x = v.view;
  for (index_t b = 0; b < x.batch(); ++b) {
    const index_t valid = options.key_lengths.empty() ? x.seq() : options.key_lengths[static_cast<std::size_t>(b)];
    for (index_t h = 0; h < x.heads(); ++h)
      for (index_t r = 0; r < lin.kp(); ++r)
        for (index_t d = 0; d < x.dim(); ++d) {
          double sum = 0;
          for (index_t j = 0; j < valid; ++j)
            sum += lin.value_projection(h)[r * lin.n_max() + j] * static_cast<double>(x(b, h, j, d));
          worst = std::max(worst, std::abs(sum));
        }
  }
  return std::max(worst, 1e-30);
}

/// Kernel output and lse against reference::attention with SPEC.md section 11's tolerances
/// relative to max |F V|: float atol 2e-5 max|FV|, rtol 1e-4, and at most 2x the RMS error
/// of a naive float evaluation of the same math plus 1e-6; double rtol 1e-12.
template <class T>
void expect_linformer_matches_reference(const Linformer& lin, const AttentionShape& s, InputSet set, std::uint64_t seed,
                                        Layout layout = Layout::kBHLD, const Options& options = {}) {
  const testing::Problem<T> p = testing::make_problem<T>(s, set, seed, layout);
  Tensor<T> out(s.batch, s.q_heads, s.q_len, s.value_dim, layout), ref = out;
  Tensor<T> lse(s.batch, s.q_heads, s.q_len, 1, Layout::kBHLD), ref_lse = lse;
  attention(lin, p.q.cview(), p.k.cview(), p.v.cview(), out.view, lse.view, options);
  reference::attention(lin, p.q.cview(), p.k.cview(), p.v.cview(), ref.view, ref_lse.view, options);
  Tensor<T> naive = out, naive_lse = lse;
  if constexpr (std::is_same_v<T, float>) {
    reference::detail::evaluate<float, float>(lin, p.q.cview(), p.k.cview(), p.v.cview(), naive.view, &naive_lse.view,
                                              options);
  }
  // Projected keys are sums over Lk rows, so logits reach hundreds (peaky set, Lk = 1000) and
  // carry float rounding beyond 2e-5 in any float method, as the +1e4 offset set of the mask
  // kinds does: max|s| <= max|lse| bounds them.
  testing::expect_spec_accuracy<T>({out, ref, naive, lse, ref_lse, naive_lse}, max_projected_value(lin, p.v, options),
                                   s.head_dim, testing::max_abs(ref_lse));
}

struct LinformerCase {
  AttentionShape shape;
  index_t kp;
  index_t n_max;
  bool per_head;  // P = Hk, else P = 1
};

std::string linformer_case_name(const ::testing::TestParamInfo<LinformerCase>& info) {
  const LinformerCase& c = info.param;
  const AttentionShape& s = c.shape;
  return "B" + std::to_string(s.batch) + "Hq" + std::to_string(s.q_heads) + "Hk" + std::to_string(s.kv_heads) + "Lq" +
         std::to_string(s.q_len) + "Lk" + std::to_string(s.kv_len) + "D" + std::to_string(s.head_dim) + "Dv" +
         std::to_string(s.value_dim) + "kp" + std::to_string(c.kp) + "nmax" + std::to_string(c.n_max) +
         (c.per_head ? "PerHead" : "Shared");
}

/// SPEC.md section 11's sizes: n over the edge lengths, D and Dv over the vector-tail sizes,
/// kp below, at and above a vector and a key tile, Lk < n_max, Lq != Lk, GQA.
std::vector<LinformerCase> linformer_cases() {
  std::vector<LinformerCase> cases;
  for (index_t n : {1, 2, 3, 7, 63, 64, 65, 127, 129, 1000}) cases.push_back({{1, 2, 2, n, n, 16, 16}, 8, n, false});
  for (index_t d : {1, 3, 7, 8, 15, 17, 31, 33, 63, 65, 127, 128, 129})
    cases.push_back({{1, 2, 1, 70, 70, d, d}, 16, 96, true});
  for (index_t kp : {1, 5, 16, 17, 255, 256, 257}) cases.push_back({{2, 2, 2, 90, 300, 32, 32}, kp, 300, false});
  cases.push_back({{2, 4, 4, 100, 100, 33, 7}, 24, 128, true});   // Dv != D, Lk < n_max, per head
  cases.push_back({{1, 8, 2, 130, 130, 64, 64}, 32, 130, true});  // GQA, one projection per kv head
  cases.push_back({{2, 6, 3, 50, 200, 16, 24}, 40, 256, false});  // Lq < Lk, GQA, shared
  cases.push_back({{1, 2, 2, 300, 40, 16, 16}, 40, 64, true});    // Lq > Lk
  return cases;
}

Linformer make_linformer(const LinformerCase& c) {
  return Linformer::gaussian(c.kp, c.n_max, c.per_head ? c.shape.kv_heads : 1, 11 + static_cast<std::uint64_t>(c.kp));
}

class LinformerFloat : public ::testing::TestWithParam<LinformerCase> {};
class LinformerDouble : public ::testing::TestWithParam<LinformerCase> {};

TEST_P(LinformerFloat, MatchesReference) {
  for (InputSet set : {InputSet::kNormal, InputSet::kPeaky}) {
    SCOPED_TRACE(testing::to_string(set));
    expect_linformer_matches_reference<float>(make_linformer(GetParam()), GetParam().shape, set, 3);
  }
}
TEST_P(LinformerDouble, MatchesReference) {
  expect_linformer_matches_reference<double>(make_linformer(GetParam()), GetParam().shape, InputSet::kNormal, 4);
}
INSTANTIATE_TEST_SUITE_P(Shapes, LinformerFloat, ::testing::ValuesIn(linformer_cases()), linformer_case_name);
INSTANTIATE_TEST_SUITE_P(Shapes, LinformerDouble, ::testing::ValuesIn(linformer_cases()), linformer_case_name);

TEST(Linformer, BlhdStridesMatchReference) {
  const LinformerCase c{{2, 4, 2, 77, 77, 24, 16}, 20, 80, true};
  expect_linformer_matches_reference<float>(make_linformer(c), c.shape, InputSet::kNormal, 5, Layout::kBLHD);
  expect_linformer_matches_reference<double>(make_linformer(c), c.shape, InputSet::kNormal, 5, Layout::kBLHD);
}

TEST(Linformer, LongSequenceMatchesReference) {
  const index_t n = kLongReferenceLength;
  const LinformerCase c{{1, 2, 2, n, n, 64, 64}, 64, n, false};
  expect_linformer_matches_reference<float>(make_linformer(c), c.shape, InputSet::kNormal, 6);
}

/// The identity projection kp = n, E = F = I turns Linformer into full attention (SPEC.md
/// section 8): the kernel against the Full kernel and against the Full reference.
TEST(Linformer, IdentityProjectionEqualsFull) {
  for (index_t n : {1, 7, 64, 129}) {
    SCOPED_TRACE(n);
    std::vector<float> identity(static_cast<std::size_t>(n * n), 0.0f);
    for (index_t i = 0; i < n; ++i) identity[static_cast<std::size_t>(i * n + i)] = 1.0f;
    const Linformer lin(n, n, identity);
    const AttentionShape s{2, 4, 2, n, n, 24, 24};
    const auto p = testing::make_problem<float>(s, InputSet::kNormal, 7);
    Tensor<float> out(s.batch, s.q_heads, s.q_len, s.value_dim, Layout::kBHLD), full = out, ref = out;
    attention(lin, p.q.cview(), p.k.cview(), p.v.cview(), out.view);
    attention(Full{}, p.q.cview(), p.k.cview(), p.v.cview(), full.view);
    reference::attention(Full{}, p.q.cview(), p.k.cview(), p.v.cview(), ref.view);
    const double v_max = testing::max_abs(p.v);
    EXPECT_TRUE(testing::all_close(out, ref, testing::Tolerance{2e-5 * v_max, 1e-4}));
    EXPECT_TRUE(testing::all_close(out, full, testing::Tolerance{2e-5 * v_max, 1e-4}));
  }
}

/// One shared matrix and Hk copies of it give the same bits: the per-head lookup is the only
/// difference.
TEST(Linformer, SharedProjectionEqualsPerHeadCopies) {
  const index_t kp = 24, n = 100, heads = 3;
  const std::vector<float> e = Linformer::gaussian_projection(kp, n, 1, 1, 0);
  const std::vector<float> f = Linformer::gaussian_projection(kp, n, 1, 1, 1);
  std::vector<float> e_copies, f_copies;
  for (index_t h = 0; h < heads; ++h) {
    e_copies.insert(e_copies.end(), e.begin(), e.end());
    f_copies.insert(f_copies.end(), f.begin(), f.end());
  }
  const Linformer shared(kp, n, e, f), per_head(kp, n, e_copies, f_copies);
  EXPECT_EQ(shared.key_projection_heads(), 1);
  EXPECT_EQ(per_head.key_projection_heads(), heads);
  const AttentionShape s{2, 6, heads, n, n, 16, 16};
  const auto p = testing::make_problem<float>(s, InputSet::kNormal, 8);
  Tensor<float> a(s.batch, s.q_heads, s.q_len, s.value_dim, Layout::kBHLD), b = a;
  attention(shared, p.q.cview(), p.k.cview(), p.v.cview(), a.view);
  attention(per_head, p.q.cview(), p.k.cview(), p.v.cview(), b.view);
  EXPECT_EQ(a.data, b.data);
}

/// Distinct per-head matrices really are used per kv head: head 1's output changes when only
/// head 1's matrix does.
TEST(Linformer, PerHeadProjectionsAreUsedPerHead) {
  const index_t kp = 8, n = 40;
  std::vector<float> e = Linformer::gaussian_projection(kp, n, 2, 2, 0);
  const Linformer before(kp, n, e);
  for (index_t x = kp * n; x < 2 * kp * n; ++x) e[static_cast<std::size_t>(x)] *= -1.0f;
  const Linformer after(kp, n, e);
  const AttentionShape s{1, 2, 2, n, n, 8, 8};
  const auto p = testing::make_problem<float>(s, InputSet::kNormal, 9);
  Tensor<float> a(1, 2, n, 8, Layout::kBHLD), b = a;
  attention(before, p.q.cview(), p.k.cview(), p.v.cview(), a.view);
  attention(after, p.q.cview(), p.k.cview(), p.v.cview(), b.view);
  for (index_t i = 0; i < n; ++i) EXPECT_EQ(a.at(0, 0, i, 0), b.at(0, 0, i, 0));
  double changed = 0;
  for (index_t i = 0; i < n; ++i) changed += std::abs(a.at(0, 1, i, 0) - b.at(0, 1, i, 0));
  EXPECT_GT(changed, 1e-3);
}

TEST(Linformer, EqualKeyAndValueProjectionsAreStoredOnce) {
  const std::vector<float> e = Linformer::gaussian_projection(16, 64, 1, 3);
  const Linformer two(16, 64, e, e), one(16, 64, e), distinct = Linformer::gaussian(16, 64, 1, 3);
  EXPECT_TRUE(two.shares_key_value_projection());
  EXPECT_TRUE(one.shares_key_value_projection());
  EXPECT_FALSE(distinct.shares_key_value_projection());
  EXPECT_EQ(two.key_projection(0), two.value_projection(0));
  const AttentionShape s{1, 2, 2, 64, 64, 16, 16};
  expect_linformer_matches_reference<float>(one, s, InputSet::kNormal, 10);
  const auto p = testing::make_problem<float>(s, InputSet::kNormal, 10);
  Tensor<float> a(1, 2, 64, 16, Layout::kBHLD), b = a;
  attention(two, p.q.cview(), p.k.cview(), p.v.cview(), a.view);
  attention(one, p.q.cview(), p.k.cview(), p.v.cview(), b.view);
  EXPECT_EQ(a.data, b.data);
}

/// Key padding (SPEC.md section 8): the kernel matches the reference; equals a call on the
/// same K/V with the padded rows zeroed; NaN in padded rows changes nothing.
TEST(Linformer, KeyPaddingEqualsZeroedPaddedRows) {
  const AttentionShape s{3, 4, 2, 60, 90, 16, 16};
  const Linformer lin = Linformer::gaussian(20, 128, 2, 12);
  const Options padded{.key_lengths = {90, 37, 0}};
  expect_linformer_matches_reference<float>(lin, s, InputSet::kNormal, 13, Layout::kBHLD, padded);
  expect_linformer_matches_reference<double>(lin, s, InputSet::kNormal, 13, Layout::kBLHD, padded);

  auto p = testing::make_problem<float>(s, InputSet::kNormal, 13);
  auto zeroed = p;
  for (index_t b = 0; b < s.batch; ++b)
    for (index_t h = 0; h < s.kv_heads; ++h)
      for (index_t j = padded.key_lengths[static_cast<std::size_t>(b)]; j < s.kv_len; ++j)
        for (index_t d = 0; d < s.head_dim; ++d) {
          zeroed.k.at(b, h, j, d) = zeroed.v.at(b, h, j, d) = 0.0f;
          p.k.at(b, h, j, d) = p.v.at(b, h, j, d) = std::numeric_limits<float>::quiet_NaN();
        }
  Tensor<float> out(s.batch, s.q_heads, s.q_len, s.value_dim, Layout::kBHLD), expected = out;
  Tensor<float> lse(s.batch, s.q_heads, s.q_len, 1, Layout::kBHLD);
  attention(lin, p.q.cview(), p.k.cview(), p.v.cview(), out.view, lse.view, padded);
  attention(lin, zeroed.q.cview(), zeroed.k.cview(), zeroed.v.cview(), expected.view);
  // Not bitwise: the projection GEMM's depth (valid rows vs all rows) changes its blocking.
  EXPECT_TRUE(testing::all_close(out, expected, testing::Tolerance{2e-5 * max_projected_value(lin, zeroed.v), 1e-4}));
  // No valid key (batch element 2): K' = V' = 0, so every row is 0 with lse = log kp.
  for (index_t h = 0; h < s.q_heads; ++h)
    for (index_t i = 0; i < s.q_len; ++i) {
      EXPECT_EQ(out.at(2, h, i, 0), 0.0f);
      EXPECT_NEAR(lse.at(2, h, i, 0), std::log(20.0), 1e-5);
    }
}

TEST(Linformer, BitwiseIdenticalAcrossThreadCounts) {
  const AttentionShape s{1, 4, 4, 2048, 2048, 64, 64};
  const Linformer lin = Linformer::gaussian(128, 2048, 1, 14);
  const auto p = testing::make_problem<float>(s, InputSet::kNormal, 15);
  Tensor<float> one(1, 4, 2048, 64, Layout::kBHLD), two = one, three = one;
  attention(lin, p.q.cview(), p.k.cview(), p.v.cview(), one.view, Options{.threads = 1});
  attention(lin, p.q.cview(), p.k.cview(), p.v.cview(), two.view, Options{.threads = 2});
  attention(lin, p.q.cview(), p.k.cview(), p.v.cview(), three.view, Options{.threads = 3});
  EXPECT_EQ(one.data, two.data);
  EXPECT_EQ(one.data, three.data);
}

/// project() gives E K and F V, checked against sums in double written here.
TEST(Linformer, ProjectGivesTheProjectedKeysAndValues) {
  const AttentionShape s{2, 3, 3, 0, 50, 9, 5};
  const Linformer lin = Linformer::xavier_uniform(6, 64, 3, 16);
  const auto p = testing::make_problem<float>({2, 3, 3, 1, 50, 9, 5}, InputSet::kNormal, 17);
  Tensor<float> keys(2, 3, 6, 9, Layout::kBHLD), values(2, 3, 6, 5, Layout::kBHLD);
  const Options options{.key_lengths = {50, 21}};
  lin.project<float>(p.k.cview(), p.v.cview(), keys.view, values.view, options);
  for (index_t b = 0; b < s.batch; ++b)
    for (index_t h = 0; h < s.kv_heads; ++h)
      for (index_t r = 0; r < lin.kp(); ++r) {
        for (index_t d = 0; d < 9; ++d) {
          double sum = 0;
          for (index_t j = 0; j < options.key_lengths[static_cast<std::size_t>(b)]; ++j)
            sum += lin.key_projection(h)[r * 64 + j] * static_cast<double>(p.k.view(b, h, j, d));
          EXPECT_NEAR(keys.at(b, h, r, d), sum, 1e-5) << b << " " << h << " " << r << " " << d;
        }
        for (index_t d = 0; d < 5; ++d) {
          double sum = 0;
          for (index_t j = 0; j < options.key_lengths[static_cast<std::size_t>(b)]; ++j)
            sum += lin.value_projection(h)[r * 64 + j] * static_cast<double>(p.v.view(b, h, j, d));
          EXPECT_NEAR(values.at(b, h, r, d), sum, 1e-5);
        }
      }
}

TEST(Linformer, LargeLogitsStayFinite) {
  const AttentionShape s{1, 2, 2, 64, 64, 16, 16};
  const Linformer lin = Linformer::gaussian(16, 64, 1, 18);
  auto p = testing::make_problem<float>(s, InputSet::kNormal, 19);
  for (float& x : p.q.data) x *= 1e4f;
  Tensor<float> out(1, 2, 64, 16, Layout::kBHLD), ref = out;
  attention(lin, p.q.cview(), p.k.cview(), p.v.cview(), out.view);
  reference::attention(lin, p.q.cview(), p.k.cview(), p.v.cview(), ref.view);
  for (float x : out.data) ASSERT_TRUE(std::isfinite(x));
  // Near one-hot rows: float logits of size ~1e5 carry rounding of ~1e-2, which may move
  // weight between near-tied projected keys; the output stays inside the range of V'.
  EXPECT_TRUE(testing::all_close(out, ref, testing::Tolerance{2.0 * max_projected_value(lin, p.v), 0}));
}

TEST(Linformer, CostCountsProjectionsAndAttention) {
  const Linformer lin = Linformer::gaussian(32, 512, 2, 1);
  const AttentionShape s{2, 8, 2, 300, 400, 64, 48};
  const PatternCost cost = lin.cost(s);
  EXPECT_DOUBLE_EQ(cost.attended_pairs, 2.0 * 8 * 300 * 32);
  EXPECT_DOUBLE_EQ(cost.extra_flops, 2.0 * 32 * 400 * (64 + 48) * 2 * 2);
  EXPECT_DOUBLE_EQ(cost.attention_flops(), 2.0 * (2.0 * 8 * 300 * 32) * (64 + 48));
  EXPECT_DOUBLE_EQ(cost.density, 32.0 / 400.0);
}

TEST(Linformer, GeneratedProjectionsAreDeterministicWithTheDocumentedLaw) {
  const std::vector<float> a = Linformer::gaussian_projection(64, 512, 2, 5),
                           b = Linformer::gaussian_projection(64, 512, 2, 5);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, Linformer::gaussian_projection(64, 512, 2, 6));
  EXPECT_NE(a, Linformer::gaussian_projection(64, 512, 2, 5, 1));
  double mean = 0, square = 0;
  for (float x : a) mean += x, square += static_cast<double>(x) * x;
  mean /= static_cast<double>(a.size()), square /= static_cast<double>(a.size());
  // 65536 samples of N(0, 1/64): the sample mean's sd is 0.125 / 256, the variance's relative
  // sd sqrt(2 / 65536) = 0.55%.
  EXPECT_NEAR(mean, 0.0, 5 * 0.125 / 256);
  EXPECT_NEAR(square * 64, 1.0, 0.03);
  const std::vector<float> u = Linformer::xavier_uniform_projection(64, 512, 2, 5);
  const double bound = std::sqrt(3.0 / (512 + 64));
  double u_square = 0;
  for (float x : u) {
    ASSERT_LE(std::abs(x), bound);
    u_square += static_cast<double>(x) * x;
  }
  EXPECT_NEAR(u_square / static_cast<double>(u.size()), bound * bound / 3, 0.03 * bound * bound / 3);
}

constexpr float kSentinel = 7.0f;

/// A valid Linformer call; each test breaks one rule and expects the message fragments and
/// an untouched output.
struct LinformerCall {
  AttentionShape shape{2, 4, 2, 10, 12, 8, 8};
  Linformer lin = Linformer::gaussian(4, 16, 2, 1);
  Options options;
  void run(index_t kv_len = 12) {
    std::vector<float> q(static_cast<std::size_t>(2 * 4 * 10 * 8), 0.5f),
        k(static_cast<std::size_t>(2 * 2 * kv_len * 8), 0.25f);
    std::vector<float> out(q.size(), kSentinel), lse(static_cast<std::size_t>(2 * 4 * 10), kSentinel);
    const auto cview = [](const std::vector<float>& x, index_t h, index_t l) { return bhld(x.data(), 2, h, l, 8); };
    try {
      attention(lin, cview(q, 4, 10), cview(k, 2, kv_len), cview(k, 2, kv_len), bhld(out.data(), 2, 4, 10, 8),
                lse_view(lse.data(), 2, 4, 10), options);
    } catch (...) {
      for (float x : out) EXPECT_EQ(x, kSentinel);
      for (float x : lse) EXPECT_EQ(x, kSentinel);
      throw;
    }
  }
};

TEST(Linformer, RejectsBadParametersAndCalls) {
  using testing::expect_invalid_argument;
  expect_invalid_argument(
      [] {
        LinformerCall call;
        call.run(17);
      },
      "Lk <= n_max = 16");
  expect_invalid_argument(
      [] {
        LinformerCall call;
        call.lin.causal = true;
        call.run();
      },
      "cannot be causal");
  expect_invalid_argument(
      [] {
        LinformerCall call;
        call.lin = Linformer::gaussian(4, 16, 3, 1);
        call.run();
      },
      "must be 1 (shared) or k.sizes[heads] = 2");
  expect_invalid_argument(
      [] {
        LinformerCall call;
        call.options.key_lengths = {12};
        call.run();
      },
      "key_lengths.size() = 1: must equal q.sizes[batch] (2)");
  expect_invalid_argument(
      [] {
        LinformerCall call;
        call.options.key_lengths = {12, 13};
        call.run();
      },
      "key_lengths[1] = 13: must lie in [0, k.sizes[seq]] = [0, 12]");
  expect_invalid_argument(
      [] {
        LinformerCall call;
        call.options.key_lengths = {-1, 3};
        call.run();
      },
      "key_lengths[0] = -1");
  expect_invalid_argument([] { Linformer(0, 16, std::vector<float>(16)); }, "Linformer kp = 0: must be >= 1");
  expect_invalid_argument([] { Linformer(4, 0, std::vector<float>(16)); }, "Linformer n_max = 0: must be >= 1");
  expect_invalid_argument([] { Linformer(4, 16, std::vector<float>(65)); },
                          "Linformer e.size() = 65: must be P * kp * n_max with P >= 1 (kp * n_max = 64)");
  expect_invalid_argument([] { Linformer(4, 16, std::vector<float>(64), std::vector<float>(63)); },
                          "Linformer f.size() = 63");
  expect_invalid_argument([] { Linformer(4, 16, std::vector<float>()); }, "Linformer e.size() = 0");
  expect_invalid_argument([] { Linformer::gaussian_projection(4, 16, 0, 1); }, "must all be >= 1");
  // The reference applies the same rules.
  expect_invalid_argument(
      [] {
        const Linformer lin = Linformer::gaussian(4, 8, 1, 1);
        std::vector<float> x(static_cast<std::size_t>(12 * 8), 0.0f), out(x.size());
        reference::attention(lin, bhld(static_cast<const float*>(x.data()), 1, 1, 12, 8),
                             bhld(static_cast<const float*>(x.data()), 1, 1, 12, 8),
                             bhld(static_cast<const float*>(x.data()), 1, 1, 12, 8), bhld(out.data(), 1, 1, 12, 8));
      },
      "Lk <= n_max = 8");
  // project() validates its outputs' shapes.
  expect_invalid_argument(
      [] {
        const Linformer lin = Linformer::gaussian(4, 16, 1, 1);
        std::vector<float> x(static_cast<std::size_t>(12 * 8), 0.0f), out(static_cast<std::size_t>(5 * 8));
        lin.project<float>(bhld(static_cast<const float*>(x.data()), 1, 1, 12, 8),
                           bhld(static_cast<const float*>(x.data()), 1, 1, 12, 8), bhld(out.data(), 1, 1, 5, 8),
                           bhld(out.data(), 1, 1, 4, 8));
      },
      "keys_out.sizes[seq] = 5: must be 4");
}

/// Key lengths are refused by patterns that would ignore them, by the kernel and the reference.
TEST(Linformer, KeyLengthsAreRefusedByOtherPatterns) {
  std::vector<float> x(static_cast<std::size_t>(12 * 8), 0.5f), out(x.size(), kSentinel);
  const auto view = bhld(static_cast<const float*>(x.data()), 1, 1, 12, 8);
  const Options options{.key_lengths = {5}};
  testing::expect_invalid_argument([&] { attention(Full{}, view, view, view, bhld(out.data(), 1, 1, 12, 8), options); },
                                   "this pattern does not take key padding");
  testing::expect_invalid_argument(
      [&] { reference::attention(Full{}, view, view, view, bhld(out.data(), 1, 1, 12, 8), options); },
      "this pattern does not take key padding");
  for (float v : out) EXPECT_EQ(v, kSentinel);
}

}  // namespace
}  // namespace attnkit
