// Reformer LSH (SPEC.md section 7): hashing apart from attention, attention against the
// float64 reference given the same bucket ids, hand-counted multiplicities, the n <= c rule,
// metamorphic identities (repeated rounds, factorized buckets), thread counts, error paths.

#include <gmock/gmock.h>
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
#include "attnkit/pattern/lsh.hpp"
#include "attnkit/reference/attention.hpp"
#include "support/accuracy.hpp"
#include "support/long_cases.hpp"
#include "support/test_data.hpp"

namespace attnkit {
namespace {

using testing::InputSet;
using testing::kLongReferenceLength;
using testing::kSweepLength;
using testing::Layout;
using testing::Tensor;

static_assert(AttentionPattern<Lsh>);
static_assert(PlansFromCall<Lsh, float> && PlansFromCall<Lsh, double> && !PlansFromShape<Lsh, float>);
static_assert(!MaskedPattern<Lsh> && !KeyPaddedPattern<Lsh>);
static_assert(reference::SelfReferencedPattern<Lsh> && reference::ReferencedPattern<Lsh>);
static_assert(ExecutablePlan<kernel::LshPlan<float>, float> && !KeyTilePlan<kernel::LshPlan<float>>);
static_assert(OccurrencePlan<kernel::LshWindowPlan<float>> && SharedQueryKeyPlan<kernel::LshWindowPlan<float>> &&
              BiasedPlan<kernel::LshWindowPlan<float>>);

/// x [B, H, n, D] (serving as q and k) and v [B, H, n, Dv] of input set `set`.
template <class T>
testing::Problem<T> lsh_problem(index_t batch, index_t heads, index_t n, index_t dim, index_t value_dim, InputSet set,
                                std::uint64_t seed, Layout layout = Layout::kBHLD) {
  return testing::make_problem<T>({batch, heads, heads, n, n, dim, value_dim}, set, seed, layout);
}

/// Kernel output and lse against reference::attention (which hashes by lsh.hash, so both use
/// the same ids) with SPEC.md section 11's tolerances: float atol 2e-5 max|V| plus the
/// rounding of float logits of size max|lse| (the +1e4 offset set), rtol 1e-4, and an RMS
/// error at most 2x that of a naive float evaluation plus 1e-6; double rtol 1e-12.
template <class T>
void expect_lsh_matches_reference(const Lsh& lsh, const testing::Problem<T>& p, const Options& options = {}) {
  const AttentionShape& s = p.shape;
  const Layout layout = p.q.view.stride(kHeads) < p.q.view.stride(kSeq) ? Layout::kBLHD : Layout::kBHLD;
  Tensor<T> out(s.batch, s.q_heads, s.q_len, s.value_dim, layout), ref = out;
  Tensor<T> lse(s.batch, s.q_heads, s.q_len, 1, Layout::kBHLD), ref_lse = lse;
  attention(lsh, p.q.cview(), p.q.cview(), p.v.cview(), out.view, lse.view, options);
  reference::attention(lsh, p.q.cview(), p.q.cview(), p.v.cview(), ref.view, ref_lse.view, options);
  Tensor<T> naive = out, naive_lse = lse;
  if constexpr (std::is_same_v<T, float>) {
    reference::detail::evaluate<float, float>(lsh, p.q.cview(), p.q.cview(), p.v.cview(), naive.view, &naive_lse.view,
                                              options);
  }
  // The largest logit: rows meet the -1e5 penalty only alone, so the largest |lse| above it.
  double largest_logit = 0;
  for (double x : ref_lse.data) largest_logit = std::max(largest_logit, x > -5e4 ? std::abs(x) : 0.0);
  testing::expect_spec_accuracy<T>({out, ref, naive, lse, ref_lse, naive_lse}, testing::max_abs(p.v), s.head_dim,
                                   largest_logit);
}

struct LshCase {
  index_t n, dim, value_dim, chunk, rounds, before, after;
  bool causal;
};
std::string lsh_case_name(const ::testing::TestParamInfo<LshCase>& info) {
  const LshCase& c = info.param;
  return "n" + std::to_string(c.n) + "_D" + std::to_string(c.dim) + "_Dv" + std::to_string(c.value_dim) + "_c" +
         std::to_string(c.chunk) + "_R" + std::to_string(c.rounds) + "_b" + std::to_string(c.before) + "_a" +
         std::to_string(c.after) + (c.causal ? "_causal" : "");
}
/// SPEC.md section 11 lengths (n not a multiple of c: padded slots; n <= c; n = 1), chunks
/// that are and are not multiples of the driver's 32 query rows, R in {1, 2, 4, 8},
/// before/after variants, causal.
std::vector<LshCase> lsh_cases() {
  return {
      {1, 16, 16, 64, 1, 1, 0, false},
      {2, 8, 3, 64, 2, 1, 0, true},
      {7, 7, 15, 64, 4, 1, 0, false},
      {63, 64, 64, 64, 2, 1, 0, false},
      {64, 33, 17, 64, 8, 1, 0, true},
      {65, 64, 64, 64, 2, 1, 0, false},
      {65, 31, 64, 64, 4, 1, 0, true},
      {127, 16, 16, 64, 1, 1, 0, false},
      {129, 17, 9, 64, 8, 1, 0, false},
      {129, 64, 64, 32, 2, 1, 0, true},
      {300, 16, 16, 7, 2, 1, 0, false},
      {300, 63, 65, 100, 4, 1, 1, false},
      {kSweepLength, 64, 64, 64, 2, 1, 0, false},
      {kSweepLength, 16, 8, 64, 4, 2, 1, true},
      {kSweepLength, 32, 32, 48, 8, 0, 0, false},
      {kSweepLength, 15, 129, 16, 1, 1, 1, false},
      {kSweepLength * 7 / 9, 128, 64, 256, 2, 1, 0, false},
      {500, 8, 8, 3, 2, 3, 2, false},
      {257, 64, 64, 33, 8, 1, 0, true},
  };
}

class LshFloat : public ::testing::TestWithParam<LshCase> {};
class LshDouble : public ::testing::TestWithParam<LshCase> {};

Lsh make_lsh(const LshCase& c) {
  Lsh lsh;
  lsh.chunk = c.chunk;
  lsh.rounds = c.rounds;
  lsh.before = c.before;
  lsh.after = c.after;
  lsh.causal = c.causal;
  lsh.seed = 11;
  return lsh;
}

TEST_P(LshFloat, MatchesReference) {
  const LshCase& c = GetParam();
  for (InputSet set : {InputSet::kNormal, InputSet::kPeaky, InputSet::kOffset}) {
    SCOPED_TRACE(testing::to_string(set));
    expect_lsh_matches_reference<float>(make_lsh(c), lsh_problem<float>(2, 2, c.n, c.dim, c.value_dim, set, 3));
  }
}
TEST_P(LshDouble, MatchesReference) {
  const LshCase& c = GetParam();
  expect_lsh_matches_reference<double>(make_lsh(c),
                                       lsh_problem<double>(1, 3, c.n, c.dim, c.value_dim, InputSet::kNormal, 4));
}
INSTANTIATE_TEST_SUITE_P(Shapes, LshFloat, ::testing::ValuesIn(lsh_cases()), lsh_case_name);
INSTANTIATE_TEST_SUITE_P(Shapes, LshDouble, ::testing::ValuesIn(lsh_cases()), lsh_case_name);

TEST(Lsh, BlhdStridesAndLongSequenceMatchReference) {
  Lsh lsh;
  lsh.rounds = 2;
  expect_lsh_matches_reference<float>(lsh, lsh_problem<float>(2, 3, 500, 64, 32, InputSet::kNormal, 5, Layout::kBLHD));
  expect_lsh_matches_reference<double>(lsh,
                                       lsh_problem<double>(1, 2, 333, 16, 16, InputSet::kNormal, 5, Layout::kBLHD));
  lsh.rounds = 4;
  lsh.buckets = {8, 16};
  expect_lsh_matches_reference<float>(lsh,
                                      lsh_problem<float>(1, 1, kLongReferenceLength, 64, 64, InputSet::kNormal, 6));
}

/// The ids of a hand-made hash: with D = 2, one rotation column (2 buckets) and Rot = [1, 0],
/// bucket = argmax [x_0, -x_0] is 0 for x_0 >= 0, else 1.
Lsh sign_hash(index_t chunk, index_t before, index_t after) {
  Lsh lsh;
  lsh.chunk = chunk;
  lsh.buckets = 2;
  lsh.before = before;
  lsh.after = after;
  lsh.rotations = {1.0f, 0.0f};  // [P = 1][D = 2][R = 1][columns = 1]
  return lsh;
}

/// o_i and lse_i of SPEC.md section 0 for a hand-listed multiset of keys per row, in double,
/// with logits sigma <x_i, x_j / ||x_j||> - 1e5 [j = i].
void expect_attends_exactly(const Lsh& lsh, const std::vector<std::vector<double>>& x, const std::vector<double>& v,
                            const std::vector<std::vector<int>>& mu) {
  const index_t n = static_cast<index_t>(x.size()), dim = static_cast<index_t>(x[0].size());
  std::vector<double> flat, out(static_cast<std::size_t>(n)), lse(static_cast<std::size_t>(n));
  for (const auto& row : x) flat.insert(flat.end(), row.begin(), row.end());
  const auto xv = bhld<const double>(flat.data(), 1, 1, n, dim);
  attention(lsh, xv, xv, bhld<const double>(v.data(), 1, 1, n, 1), bhld(out.data(), 1, 1, n, 1),
            lse_view(lse.data(), 1, 1, n), Options{.scale = 0.5});
  for (index_t i = 0; i < n; ++i) {
    double z = 0, weighted = 0;
    for (index_t j = 0; j < n; ++j) {
      const double norm = std::hypot(x[j][0], x[j][1]);
      const double logit = 0.5 * (x[i][0] * x[j][0] + x[i][1] * x[j][1]) / norm + (i == j ? -1e5 : 0.0);
      z += mu[i][j] * std::exp(logit);
      weighted += mu[i][j] * std::exp(logit) * v[j];
    }
    EXPECT_NEAR(out[i], weighted / z, 1e-12) << "row " << i;
    EXPECT_NEAR(lse[i], std::log(z), 1e-12) << "row " << i;
  }
}

/// Signs of x_0 give ids [1, 0, 1, 0, 1, 0]; sorted: [1 3 | 5 0 | 2 4]; each chunk also
/// sees the one before it, circularly.
TEST(Lsh, HandCountedWindowsOfOneRound) {
  const Lsh lsh = sign_hash(2, 1, 0);
  const std::vector<std::vector<double>> x{{-1, 0.3}, {0.5, 1}, {-2, -1}, {1, 0.2}, {-0.7, 0.4}, {0.9, -0.8}};
  const std::vector<double> v{1, 2, 3, 4, 5, 6};
  const std::vector<std::vector<int>> mu{{1, 1, 0, 1, 0, 1},  // row 0 (chunk 1): chunks 0 and 1 hold 1 3 5 0
                                         {0, 1, 1, 1, 1, 0},  // row 1 (chunk 0): chunks 2 and 0 hold 2 4 1 3
                                         {1, 0, 1, 0, 1, 1},  // row 2 (chunk 2): chunks 1 and 2 hold 5 0 2 4
                                         {0, 1, 1, 1, 1, 0},  //
                                         {1, 0, 1, 0, 1, 1},  //
                                         {1, 1, 0, 1, 0, 1}};
  std::vector<double> flat;
  for (const auto& row : x) flat.insert(flat.end(), row.begin(), row.end());
  const LshBucketIds ids = lsh.hash<double>(bhld<const double>(flat.data(), 1, 1, 6, 2));
  for (index_t i = 0; i < 6; ++i) EXPECT_EQ(ids(0, 0, 0, i), i % 2 == 0 ? 1 : 0);
  const auto counted = reference::detail::lsh_multiplicities(lsh, ids, 0, 0);
  for (index_t i = 0; i < 6; ++i)
    for (index_t j = 0; j < 6; ++j)
      EXPECT_EQ(counted.multiplicity(0, i, j), mu[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)]);
  expect_attends_exactly(lsh, x, v, mu);
}

/// Two chunks and a window of three (before = 2): a row's own chunk is met twice and counts
/// twice, the other once. Five rows in chunks of 3: the second chunk has a padded slot.
TEST(Lsh, ChunksMetTwiceCountTwiceAndPaddingIsNeverAttended) {
  const Lsh lsh = sign_hash(3, 2, 0);
  // ids [0, 1, 0, 0, 1]: sorted [0 2 3 | 1 4 pad].
  const std::vector<std::vector<double>> x{{1, 0.3}, {-0.5, 1}, {2, -1}, {0.1, 0.2}, {-0.7, 0.4}};
  const std::vector<double> v{1, -2, 3, 0.5, 7};
  const std::vector<std::vector<int>> mu{
      {2, 1, 2, 2, 1}, {1, 2, 1, 1, 2}, {2, 1, 2, 2, 1}, {2, 1, 2, 2, 1}, {1, 2, 1, 1, 2}};
  expect_attends_exactly(lsh, x, v, mu);
}

/// Causal: row i never attends a later row, whatever the sorted order; NaN in a V row that no
/// earlier row attends never reaches them.
TEST(Lsh, CausalExcludesLaterRowsAndNeverReadsThem) {
  Lsh lsh;
  lsh.chunk = 16;
  lsh.rounds = 3;
  lsh.causal = true;
  auto p = lsh_problem<float>(1, 2, 200, 16, 16, InputSet::kNormal, 7);
  for (index_t h = 0; h < 2; ++h)
    for (index_t d = 0; d < 16; ++d) p.v.at(0, h, 199, d) = std::numeric_limits<float>::quiet_NaN();
  Tensor<float> out(1, 2, 200, 16, Layout::kBHLD), ref = out;
  attention(lsh, p.q.cview(), p.q.cview(), p.v.cview(), out.view);
  reference::attention(lsh, p.q.cview(), p.q.cview(), p.v.cview(), ref.view);
  for (index_t h = 0; h < 2; ++h)
    for (index_t i = 0; i < 199; ++i)
      for (index_t d = 0; d < 16; ++d) {
        ASSERT_TRUE(std::isfinite(out.at(0, h, i, d))) << h << " " << i;
        EXPECT_NEAR(out.at(0, h, i, d), ref.at(0, h, i, d), 2e-5 * 4 + 1e-4 * std::abs(ref.at(0, h, i, d)));
      }
}

/// A row whose only key is itself (n = 1; row 0 under causal, n <= c) still attends it: the
/// penalty is a bias, so o = v and lse = sigma ||x|| - 1e5 (<x, x / ||x||> = ||x||).
TEST(Lsh, RowsWhoseOnlyKeyIsThemselvesAttendThemselves) {
  for (index_t n : {1, 40}) {
    Lsh lsh;
    lsh.causal = true;
    lsh.rounds = 4;
    const auto p = lsh_problem<double>(1, 1, n, 8, 4, InputSet::kNormal, 8);
    Tensor<double> out(1, 1, n, 4, Layout::kBHLD), lse(1, 1, n, 1, Layout::kBHLD);
    attention(lsh, p.q.cview(), p.q.cview(), p.v.cview(), out.view, lse.view);
    double norm = 0;
    for (index_t d = 0; d < 8; ++d) norm += p.q.view(0, 0, 0, d) * p.q.view(0, 0, 0, d);
    for (index_t d = 0; d < 4; ++d) EXPECT_DOUBLE_EQ(out.at(0, 0, 0, d), p.v.view(0, 0, 0, d));
    EXPECT_NEAR(lse.at(0, 0, 0, 0), std::sqrt(norm) / std::sqrt(8.0) - 1e5, 1e-9);
  }
}

/// n <= c: one round of full shared-QK attention with the self penalty, whatever the rounds
/// and buckets: mu = 1 (lse = log Z, not log R Z).
TEST(Lsh, ShortSequencesAreOneRoundOfFullAttention) {
  const index_t n = 50;
  Lsh one, many;
  many.rounds = 8;
  many.buckets = 16;
  many.seed = 99;
  const auto p = lsh_problem<double>(1, 2, n, 8, 8, InputSet::kNormal, 9);
  Tensor<double> a(1, 2, n, 8, Layout::kBHLD), b = a, lse_a(1, 2, n, 1, Layout::kBHLD), lse_b = lse_a;
  attention(one, p.q.cview(), p.q.cview(), p.v.cview(), a.view, lse_a.view);
  attention(many, p.q.cview(), p.q.cview(), p.v.cview(), b.view, lse_b.view);
  EXPECT_EQ(a.data, b.data);
  EXPECT_EQ(lse_a.data, lse_b.data);
  // Row i against the dense sum written here.
  for (index_t h = 0; h < 2; ++h)
    for (index_t i = 0; i < n; ++i) {
      double z = 0, o0 = 0;
      for (index_t j = 0; j < n; ++j) {
        double dot = 0, norm = 0;
        for (index_t d = 0; d < 8; ++d) {
          dot += p.q.view(0, h, i, d) * p.q.view(0, h, j, d);
          norm += p.q.view(0, h, j, d) * p.q.view(0, h, j, d);
        }
        const double w = std::exp(dot / std::sqrt(norm) / std::sqrt(8.0) + (i == j ? -1e5 : 0.0));
        z += w;
        o0 += w * p.v.view(0, h, j, 0);
      }
      EXPECT_NEAR(a.at(0, h, i, 0), o0 / z, 1e-12);
      EXPECT_NEAR(lse_a.at(0, h, i, 0), std::log(z), 1e-12);
    }
}

/// HF's and trax's keys x / sqrt(||x||^2 + D 1e-6) (key_epsilon = 1e-6, Options::scale = 1 as
/// for their checkpoints) against the dense sum written here, on rows small enough for the
/// epsilon to matter; the unit keys of key_epsilon = 0 give another result.
TEST(Lsh, KeyEpsilonNormalisesKeysAsHuggingFace) {
  const index_t n = 40, dim = 8;
  auto p = lsh_problem<double>(1, 1, n, dim, 4, InputSet::kNormal, 21);
  for (double& x : p.q.data) x *= 1e-3;  // ||x||^2 about 8e-6, D 1e-6 = 8e-6
  Lsh hf;
  hf.key_epsilon = 1e-6;
  Tensor<double> out(1, 1, n, 4, Layout::kBHLD), unit = out;
  attention(hf, p.q.cview(), p.q.cview(), p.v.cview(), out.view, Options{.scale = 1});
  attention(Lsh{}, p.q.cview(), p.q.cview(), p.v.cview(), unit.view, Options{.scale = 1});
  double largest_change = 0;
  for (index_t i = 0; i < n; ++i) {
    double z = 0, o0 = 0;
    for (index_t j = 0; j < n; ++j) {
      double dot = 0, squares = dim * 1e-6;
      for (index_t d = 0; d < dim; ++d) {
        dot += p.q.view(0, 0, i, d) * p.q.view(0, 0, j, d);
        squares += p.q.view(0, 0, j, d) * p.q.view(0, 0, j, d);
      }
      const double w = std::exp(dot / std::sqrt(squares) + (i == j ? -1e5 : 0.0));
      z += w;
      o0 += w * p.v.view(0, 0, j, 0);
    }
    EXPECT_NEAR(out.at(0, 0, i, 0), o0 / z, 1e-12);
    largest_change = std::max(largest_change, std::abs(unit.at(0, 0, i, 0) - out.at(0, 0, i, 0)));
  }
  EXPECT_GT(largest_change, 1e-6);
}

/// Hashing in float and double agree except where the argmax is within rounding of a tie,
/// and both follow the definition (argmax over [y, -y] per factor, first factor least
/// significant) computed here in double from the inspectable rotation.
TEST(LshHashing, FloatAndDoubleAgreeExceptWithinTheArgmaxMargin) {
  for (const LshBuckets& buckets : {LshBuckets(64), LshBuckets{4, 6, 8}}) {
    Lsh lsh;
    lsh.rounds = 3;
    lsh.buckets = buckets;
    lsh.seed = 21;
    const index_t B = 2, H = 2, n = 700, D = 24;
    const auto p = lsh_problem<float>(B, H, n, D, 1, InputSet::kNormal, 10);
    const auto pd = lsh_problem<double>(B, H, n, D, 1, InputSet::kNormal, 10);  // the same values in double
    const LshBucketIds single = lsh.hash<float>(p.q.cview()), twice = lsh.hash<double>(pd.q.cview());
    const std::vector<index_t> factors = lsh.bucket_factors(n);
    index_t columns = 0, total = 1;
    for (index_t f : factors) columns += f / 2, total *= f;
    ASSERT_EQ(single.buckets(), total);
    int differing = 0;
    for (index_t b = 0; b < B; ++b)
      for (index_t h = 0; h < H; ++h) {
        const std::vector<float> rot = lsh.rotation(h, D, n);  // [D][R][columns]
        for (index_t r = 0; r < 3; ++r)
          for (index_t i = 0; i < n; ++i) {
            index_t expected = 0, place = 1, offset = 0;
            double margin = std::numeric_limits<double>::infinity();
            for (index_t f : factors) {
              std::vector<double> candidates;
              for (index_t c = 0; c < f / 2; ++c) {
                double y = 0;
                for (index_t d = 0; d < D; ++d)
                  y += pd.q.view(b, h, i, d) * rot[static_cast<std::size_t>((d * 3 + r) * columns + offset + c)];
                candidates.push_back(y);
              }
              for (index_t c = 0; c < f / 2; ++c) candidates.push_back(-candidates[static_cast<std::size_t>(c)]);
              const auto best = std::max_element(candidates.begin(), candidates.end());  // first on ties
              double second = -std::numeric_limits<double>::infinity();
              for (auto it = candidates.begin(); it != candidates.end(); ++it)
                if (it != best) second = std::max(second, *it);
              margin = std::min(margin, *best - second);
              expected += (best - candidates.begin()) * place;
              place *= f, offset += f / 2;
            }
            const int a = single(b, h, r, i), d = twice(b, h, r, i);
            ASSERT_GE(a, 0);
            ASSERT_LT(a, total);
            if (margin > 1e-4) {
              EXPECT_EQ(a, expected) << b << " " << h << " " << r << " " << i;
              EXPECT_EQ(d, expected);
            } else {
              differing += a != d;
            }
          }
      }
    EXPECT_LE(differing, 3);
  }
}

/// Rotations come from (seed, layer, head, round) only: the same for any thread count, batch
/// composition or number of rounds; N(0, 1) entries.
TEST(LshHashing, RotationsAndIdsAreDeterministic) {
  Lsh lsh;
  lsh.rounds = 2;
  lsh.seed = 5;
  lsh.layer = 3;
  const index_t n = 1024, D = 32;
  const auto p = lsh_problem<float>(2, 4, n, D, 1, InputSet::kNormal, 11);
  const LshBucketIds one = lsh.hash<float>(p.q.cview(), Options{.threads = 1});
  const LshBucketIds two = lsh.hash<float>(p.q.cview(), Options{.threads = 2});
  const LshBucketIds three = lsh.hash<float>(p.q.cview(), Options{.threads = 3});
  // The second batch element hashed alone.
  const TensorView<const float> second(p.q.view.row(1, 0, 0), {1, 4, n, D}, p.q.view.strides());
  const LshBucketIds alone = lsh.hash<float>(second);
  for (index_t h = 0; h < 4; ++h)
    for (index_t r = 0; r < 2; ++r)
      for (index_t i = 0; i < n; ++i) {
        ASSERT_EQ(one(0, h, r, i), two(0, h, r, i));
        ASSERT_EQ(one(1, h, r, i), three(1, h, r, i));
        ASSERT_EQ(one(1, h, r, i), alone(0, h, r, i));
      }
  // Round 0 of R = 2 is the rotation of R = 1; another layer or seed draws anew.
  Lsh single = lsh;
  single.rounds = 1;
  const std::vector<float> both = lsh.rotation(1, D, n), first = single.rotation(1, D, n);
  const index_t columns = lsh.bucket_layout(n).columns;
  for (index_t d = 0; d < D; ++d)
    for (index_t c = 0; c < columns; ++c) {
      ASSERT_EQ(both[static_cast<std::size_t>((d * 2) * columns + c)],
                first[static_cast<std::size_t>(d * columns + c)]);
    }
  Lsh other = lsh;
  other.layer = 4;
  EXPECT_NE(other.rotation(1, D, n), both);
  double mean = 0, square = 0;
  std::vector<float> all;
  for (index_t h = 0; h < 4; ++h) {
    const std::vector<float> rot = Lsh{.rounds = 8, .buckets = 512, .seed = 1}.rotation(h, 64, 8192);
    all.insert(all.end(), rot.begin(), rot.end());
  }
  for (float x : all) mean += x, square += static_cast<double>(x) * x;
  mean /= static_cast<double>(all.size()), square /= static_cast<double>(all.size());
  // 524288 N(0, 1) samples: the mean's sd is 0.0014, the variance's 0.002.
  EXPECT_NEAR(mean, 0.0, 0.007);
  EXPECT_NEAR(square, 1.0, 0.01);
}

/// HF's automatic count, 2^floor(log2(2 floor(n / c))), split as [2^(p/2), 2^(p - p/2)] past
/// 2 max(floor(sqrt(M / c)), c).
TEST(LshHashing, AutomaticBucketCountFollowsHuggingFace) {
  using Factors = std::vector<index_t>;
  Lsh lsh;  // chunk 64: the limit is 128 until M = 64 * 64^2
  EXPECT_EQ(lsh.bucket_factors(64), Factors{2});
  EXPECT_EQ(lsh.bucket_factors(100), Factors{2});
  EXPECT_EQ(lsh.bucket_factors(1024), Factors{32});
  EXPECT_EQ(lsh.bucket_factors(4096), Factors{128});
  EXPECT_EQ(lsh.bucket_factors(8192), (Factors{16, 16}));
  EXPECT_EQ(lsh.bucket_factors(16384), (Factors{16, 32}));
  EXPECT_EQ(lsh.bucket_factors(65536), (Factors{32, 64}));
  lsh.max_positions = 1 << 20;  // limit 2 max(128, 64) = 256
  EXPECT_EQ(lsh.bucket_factors(8192), Factors{256});
  lsh.chunk = 256;  // enwik8: 65536 positions, chunk 256: 2 max(16, 256) = 512
  lsh.max_positions = 65536;
  EXPECT_EQ(lsh.bucket_factors(65536), Factors{512});
  lsh.buckets = {64, 128};
  EXPECT_EQ(lsh.bucket_factors(65536), (Factors{64, 128}));
  EXPECT_EQ(lsh.bucket_layout(65536).columns, 96);
  EXPECT_EQ(lsh.bucket_layout(65536).buckets, 8192);
}

/// R rounds with identical rotation slices give every row the same window R times: the same
/// softmax as R = 1 (mu scaled by R), with lse larger by ln R.
TEST(Lsh, IdenticalRotationSlicesEqualOneRound) {
  const index_t H = 2, n = 900, D = 32;
  Lsh single;
  single.chunk = 48;
  single.seed = 17;
  const index_t columns = single.bucket_layout(n).columns;
  const auto p = lsh_problem<float>(1, H, n, D, D, InputSet::kNormal, 12);
  Tensor<float> one(1, H, n, D, Layout::kBHLD), lse_one(1, H, n, 1, Layout::kBHLD);
  attention(single, p.q.cview(), p.q.cview(), p.v.cview(), one.view, lse_one.view);
  for (index_t rounds : {2, 4, 8}) {
    Lsh repeated = single;
    repeated.rounds = rounds;
    for (index_t h = 0; h < H; ++h) {
      const std::vector<float> rot = single.rotation(h, D, n);
      for (index_t d = 0; d < D; ++d)
        for (index_t r = 0; r < rounds; ++r)
          repeated.rotations.insert(repeated.rotations.end(), rot.begin() + d * columns,
                                    rot.begin() + (d + 1) * columns);
    }
    Tensor<float> many = one, lse_many = lse_one;
    attention(repeated, p.q.cview(), p.q.cview(), p.v.cview(), many.view, lse_many.view);
    EXPECT_TRUE(testing::all_close(many, one, testing::Tolerance{1e-6, 1e-5})) << rounds;
    for (std::size_t i = 0; i < lse_one.data.size(); ++i) {
      ASSERT_NEAR(lse_many.data[i], lse_one.data[i] + std::log(static_cast<double>(rounds)),
                  1e-4 * (1 + std::abs(lse_one.data[i])));
    }
  }
}

TEST(Lsh, FactorizedBucketsMatchReference) {
  Lsh lsh;
  lsh.chunk = 32;
  lsh.rounds = 2;
  lsh.buckets = {4, 8};
  const auto p = lsh_problem<float>(1, 2, 600, 32, 32, InputSet::kNormal, 13);
  expect_lsh_matches_reference<float>(lsh, p);
  const LshBucketIds ids = lsh.hash<float>(p.q.cview());
  std::vector<int> seen(32, 0);
  for (index_t i = 0; i < 600; ++i) ++seen[static_cast<std::size_t>(ids(0, 1, 1, i))];
  for (int count : seen) EXPECT_GT(count, 0);  // 600 rows over 32 buckets: every bucket used
}

TEST(Lsh, BitwiseIdenticalAcrossThreadCounts) {
  Lsh lsh;
  lsh.rounds = 4;
  lsh.chunk = 40;
  const auto p = lsh_problem<float>(2, 3, 2000, 64, 64, InputSet::kNormal, 14);
  Tensor<float> one(2, 3, 2000, 64, Layout::kBHLD), two = one, three = one;
  Tensor<float> lse_one(2, 3, 2000, 1, Layout::kBHLD), lse_two = lse_one, lse_three = lse_one;
  attention(lsh, p.q.cview(), p.q.cview(), p.v.cview(), one.view, lse_one.view, Options{.threads = 1});
  attention(lsh, p.q.cview(), p.q.cview(), p.v.cview(), two.view, lse_two.view, Options{.threads = 2});
  attention(lsh, p.q.cview(), p.q.cview(), p.v.cview(), three.view, lse_three.view, Options{.threads = 3});
  EXPECT_EQ(one.data, two.data);
  EXPECT_EQ(one.data, three.data);
  EXPECT_EQ(lse_one.data, lse_two.data);
  EXPECT_EQ(lse_one.data, lse_three.data);
}

TEST(Lsh, LargeLogitsAndZeroRowsStayFinite) {
  Lsh lsh;
  lsh.rounds = 2;
  lsh.chunk = 32;
  auto p = lsh_problem<float>(1, 1, 300, 16, 16, InputSet::kNormal, 15);
  for (float& x : p.q.data) x *= 1e4f;
  for (index_t d = 0; d < 16; ++d) p.q.at(0, 0, 7, d) = 0.0f;  // a zero row: its key is 0
  Tensor<float> huge_out(1, 1, 300, 16, Layout::kBHLD);
  auto huge = p;
  for (index_t d = 0; d < 16; ++d) huge.q.at(0, 0, 9, d) = 1e30f;  // ||x||^2 overflows float: a zero row
  attention(lsh, huge.q.cview(), huge.q.cview(), huge.v.cview(), huge_out.view);
  for (float x : huge_out.data) ASSERT_TRUE(std::isfinite(x));
  Tensor<float> out(1, 1, 300, 16, Layout::kBHLD), ref = out;
  attention(lsh, p.q.cview(), p.q.cview(), p.v.cview(), out.view);
  reference::attention(lsh, p.q.cview(), p.q.cview(), p.v.cview(), ref.view);
  for (float x : out.data) ASSERT_TRUE(std::isfinite(x));
  // Logits of size ~1e5 carry float rounding of ~1e-2: near-tied keys may trade weight, so
  // the bound is the range of V.
  EXPECT_TRUE(testing::all_close(out, ref, testing::Tolerance{2.0 * testing::max_abs(p.v), 0}));
  // The zero row's logits are all 0 but the penalty: the mean of its window's other values.
  EXPECT_TRUE(std::isfinite(out.at(0, 0, 7, 0)));
}

TEST(Lsh, CostCountsWindowSlotsAndHashing) {
  Lsh lsh;
  lsh.rounds = 4;
  lsh.before = 2;
  lsh.after = 1;
  lsh.buckets = {8, 16};
  const AttentionShape s{2, 8, 8, 1000, 1000, 64, 32};
  const PatternCost cost = lsh.cost(s);
  EXPECT_DOUBLE_EQ(cost.attended_pairs, 2.0 * 8 * 4 * 1000 * 4 * 64);
  EXPECT_DOUBLE_EQ(cost.extra_flops, 2.0 * 1000 * 64 * 4 * 12 * 2 * 8);
  EXPECT_DOUBLE_EQ(cost.attention_flops(), 2.0 * cost.attended_pairs * (64 + 32));
  const AttentionShape short_shape{1, 1, 1, 40, 40, 8, 8};
  EXPECT_DOUBLE_EQ(lsh.cost(short_shape).attended_pairs, 1600.0);
  EXPECT_DOUBLE_EQ(lsh.cost(short_shape).extra_flops, 0.0);
}

/// Every rejected parameter throws attnkit::invalid_argument naming it, with nothing written.
TEST(Lsh, RejectsBadInput) {
  const auto p = lsh_problem<float>(1, 2, 100, 8, 8, InputSet::kNormal, 16);
  const auto other = lsh_problem<float>(1, 2, 100, 8, 8, InputSet::kNormal, 16);  // equal values, another buffer
  const auto longer = lsh_problem<float>(1, 2, 120, 8, 8, InputSet::kNormal, 16);
  const auto expect_rejected = [&](const Lsh& lsh, const TensorView<const float>& k, const TensorView<const float>& v,
                                   const std::string& argument, const Options& options = {}) {
    Tensor<float> out(1, 2, 100, 8, Layout::kBHLD);
    std::fill(out.data.begin(), out.data.end(), 7.0f);
    try {
      attention(lsh, p.q.cview(), k, v, out.view, options);
      ADD_FAILURE() << "no exception for " << argument;
    } catch (const attnkit::invalid_argument& e) {
      EXPECT_THAT(e.what(), ::testing::HasSubstr(argument));
    }
    for (float x : out.data) ASSERT_EQ(x, 7.0f);
  };
  const auto x = p.q.cview(), v = p.v.cview();
  expect_rejected(Lsh{.buckets = 7}, x, v, "Lsh.buckets = 7");
  expect_rejected(Lsh{.buckets = {4, 3}}, x, v, "Lsh.buckets = 3");
  expect_rejected(Lsh{.buckets = {0, 4}}, x, v, "Lsh.buckets = 0");
  expect_rejected(Lsh{.chunk = 0}, x, v, "Lsh.chunk = 0");
  expect_rejected(Lsh{.rounds = 0}, x, v, "Lsh.rounds = 0");
  expect_rejected(Lsh{.before = -1}, x, v, "Lsh.before = -1");
  expect_rejected(Lsh{.after = -2}, x, v, "Lsh.after = -2");
  expect_rejected(Lsh{.max_positions = -1}, x, v, "Lsh.max_positions");
  expect_rejected(Lsh{.rotations = {1.0f, 2.0f}}, x, v, "Lsh.rotations.size() = 2");
  expect_rejected(Lsh{.key_epsilon = -1e-6}, x, v, "Lsh.key_epsilon = -1e-06");
  expect_rejected(Lsh{}, other.q.cview(), v, "k = another view than q");
  expect_rejected(Lsh{}, longer.q.cview(), longer.v.cview(), "k.sizes[seq] = 120");
  expect_rejected(Lsh{}, x, v, "key_lengths", Options{.key_lengths = {50}});
  EXPECT_THROW(Lsh{.buckets = 5}.hash<float>(x), attnkit::invalid_argument);
  EXPECT_THROW(reference::attention(Lsh{}, x, other.q.cview(), v, Tensor<float>(1, 2, 100, 8, Layout::kBHLD).view),
               attnkit::invalid_argument);
}

}  // namespace
}  // namespace attnkit
