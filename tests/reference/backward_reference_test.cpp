// reference::attention_backward against central finite differences of the forward reference
// (L = sum <d_out, out>, every element of q, k and v perturbed), by hand for one key, and its
// argument checks. The gradients come from TRAINING.md's formulas; the differences only from
// reference::attention, so the two sides share no code but the mask.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "attnkit/core/errors.hpp"
#include "attnkit/core/options.hpp"
#include "attnkit/core/score_modifiers.hpp"
#include "attnkit/pattern/kinds.hpp"
#include "attnkit/pattern/union.hpp"
#include "attnkit/reference/attention.hpp"
#include "attnkit/reference/backward.hpp"
#include "support/test_data.hpp"

namespace attnkit::testing {
namespace {

/// L(q, k, v) = sum over out of d_out * out, out the forward reference.
template <class P>
double loss(const P& pattern, const Problem<double>& p, const Tensor<double>& d_out, const Options& options) {
  Tensor<double> out(p.shape.batch, p.shape.q_heads, p.shape.q_len, p.shape.value_dim, Layout::kBHLD);
  reference::attention(pattern, p.q.cview(), p.k.cview(), p.v.cview(), out.view, options);
  double sum = 0;
  for (std::size_t e = 0; e < out.data.size(); ++e) sum += out.data[e] * d_out.data[e];
  return sum;
}

/// Every gradient element against (L(x + h) - L(x - h)) / 2h. The difference's error is
/// h^2 / 6 |L'''| (inputs N(0, 1), scores of order 1: |L'''| of order 10-100 here, so about
/// 1e-8 at h = 1e-5) plus the rounding of L, 1e-16 |L| / h (1e-11): 1e-6 bounds both with room,
/// while a wrong term of the gradient (a missing D_i, a factor sigma, GQA's sum) is of order
/// 0.1-1.
template <class P>
void expect_gradients_match_differences(const P& pattern, const AttentionShape& shape, const Options& options,
                                        const std::string& name) {
  Problem<double> p = make_problem<double>(shape, InputSet::kNormal, 41);
  Tensor<double> d_out(shape.batch, shape.q_heads, shape.q_len, shape.value_dim, Layout::kBHLD);
  d_out.fill_normal(41, 4);
  Tensor<double> d_q(shape.batch, shape.q_heads, shape.q_len, shape.head_dim, Layout::kBHLD);
  Tensor<double> d_k(shape.batch, shape.kv_heads, shape.kv_len, shape.head_dim, Layout::kBHLD);
  Tensor<double> d_v(shape.batch, shape.kv_heads, shape.kv_len, shape.value_dim, Layout::kBHLD);
  reference::attention_backward(pattern, p.q.cview(), p.k.cview(), p.v.cview(), d_out.cview(), d_q.view, d_k.view,
                                d_v.view, options);
  constexpr double kStep = 1e-5, kTolerance = 1e-6;
  const auto check = [&](Tensor<double>& input, const Tensor<double>& gradient, const char* input_name) {
    for (std::size_t e = 0; e < input.data.size(); ++e) {
      const double saved = input.data[e];
      input.data[e] = saved + kStep;
      const double above = loss(pattern, p, d_out, options);
      input.data[e] = saved - kStep;
      const double below = loss(pattern, p, d_out, options);
      input.data[e] = saved;
      EXPECT_NEAR(gradient.data[e], (above - below) / (2 * kStep), kTolerance)
          << name << ": d_" << input_name << "[" << e << "]";
    }
  };
  check(p.q, d_q, "q");
  check(p.k, d_k, "k");
  check(p.v, d_v, "v");
}

TEST(ReferenceBackward, MatchesFiniteDifferencesForMaskKinds) {
  // GQA (two query heads per kv head), Lq != Lk both ways, D != Dv.
  for (const AttentionShape& shape : {AttentionShape{1, 4, 2, 6, 9, 3, 2}, AttentionShape{2, 2, 1, 7, 5, 4, 3}}) {
    const std::string at = " Lq " + std::to_string(shape.q_len) + " Lk " + std::to_string(shape.kv_len);
    expect_gradients_match_differences(Full{}, shape, {}, "Full" + at);
    // A causal call with Lq > Lk has empty first rows: their gradient is 0 (the differences too).
    expect_gradients_match_differences(Full{.causal = true}, shape, {}, "causal" + at);
    expect_gradients_match_differences(SlidingWindow(2, 1), shape, {}, "SlidingWindow(2, 1)" + at);
    expect_gradients_match_differences(Dilated(2, 2, {2}), shape, {}, "Dilated" + at);
    // A block size that cuts Lq and Lk into as many blocks (the layout is square).
    index_t block = 2;
    while ((shape.q_len + block - 1) / block != (shape.kv_len + block - 1) / block) ++block;
    expect_gradients_match_differences(BlockSparse::local(block, (shape.q_len + block - 1) / block), shape, {},
                                       "BlockSparse" + at);
    expect_gradients_match_differences(Union{SlidingWindow::symmetric(1), Global({0, 3})}, shape, {},
                                       "Longformer" + at);
    expect_gradients_match_differences(Full{}, shape, Options{.scale = 0.7}, "Full, scale 0.7" + at);
  }
  // BigBird (self-attention only): multiplicities above 1 weigh a key's score as often as it is
  // attended.
  expect_gradients_match_differences(BigBird(2, 1, 3), AttentionShape{1, 4, 2, 8, 8, 3, 2}, {}, "BigBird");
}

TEST(ReferenceBackward, MatchesFiniteDifferencesWithScoreModifiers) {
  const AttentionShape shape{1, 2, 1, 5, 8, 3, 2};
  Options capped;
  capped.softcap = 0.8;  // scores of order 1: tanh well away from linear
  Options alibi;
  alibi.alibi_slopes = alibi_slopes(2);
  Options both = alibi;
  both.softcap = 1.5;
  expect_gradients_match_differences(Full{.causal = true}, shape, capped, "causal, softcap");
  expect_gradients_match_differences(SlidingWindow(3, 2), shape, alibi, "window, ALiBi");
  expect_gradients_match_differences(Full{}, shape, both, "Full, softcap and ALiBi");
}

TEST(ReferenceBackward, OneKeyByHand) {
  // One key: its weight is 1 whatever the score, so out = v, d_v = d_out and d_q = d_k = 0.
  const double q[] = {0.3, -2.0}, k[] = {1.5, 0.25}, v[] = {4.0, -1.0, 0.5}, d_out[] = {2.0, 3.0, -7.0};
  double d_q[2] = {9, 9}, d_k[2] = {9, 9}, d_v[3] = {9, 9, 9};
  reference::attention_backward(Full{}, bhld(q, 1, 1, 1, 2), bhld(k, 1, 1, 1, 2), bhld(v, 1, 1, 1, 3),
                                bhld(d_out, 1, 1, 1, 3), bhld(d_q, 1, 1, 1, 2), bhld(d_k, 1, 1, 1, 2),
                                bhld(d_v, 1, 1, 1, 3));
  EXPECT_EQ(std::vector<double>(d_q, d_q + 2), (std::vector<double>{0, 0}));
  EXPECT_EQ(std::vector<double>(d_k, d_k + 2), (std::vector<double>{0, 0}));
  EXPECT_EQ(std::vector<double>(d_v, d_v + 3), (std::vector<double>{2.0, 3.0, -7.0}));
}

TEST(ReferenceBackward, RejectsBadArgumentsWritingNothing) {
  const AttentionShape shape{1, 2, 1, 4, 4, 3, 2};
  const Problem<double> p = make_problem<double>(shape, InputSet::kNormal, 5);
  Tensor<double> d_out(1, 2, 4, 2, Layout::kBHLD);
  Tensor<double> d_q(1, 2, 4, 3, Layout::kBHLD), d_k(1, 1, 4, 3, Layout::kBHLD), d_v(1, 1, 4, 2, Layout::kBHLD);
  Tensor<double> short_d_k(1, 1, 3, 3, Layout::kBHLD);
  for (Tensor<double>* t : {&d_q, &d_k, &d_v, &short_d_k}) std::fill(t->data.begin(), t->data.end(), 9.0);
  const auto expect_rejected = [&](auto&& call, const std::string& argument) {
    try {
      call();
      ADD_FAILURE() << "accepted; expected a rejection of " << argument;
    } catch (const invalid_argument& error) {
      EXPECT_NE(std::string(error.what()).find(argument), std::string::npos) << error.what();
    }
    for (const Tensor<double>* t : {&d_q, &d_k, &d_v, &short_d_k})
      EXPECT_TRUE(std::all_of(t->data.begin(), t->data.end(), [](double x) { return x == 9.0; })) << argument;
  };
  expect_rejected(
      [&] {
        reference::attention_backward(Full{}, p.q.cview(), p.k.cview(), p.v.cview(), d_out.cview(), d_q.view,
                                      short_d_k.view, d_v.view);
      },
      "d_k.sizes[seq]");
  expect_rejected(
      [&] {
        reference::attention_backward(Full{}, p.q.cview(), p.k.cview(), p.v.cview(), d_v.cview(), d_q.view, d_k.view,
                                      d_v.view);
      },
      "d_out.sizes");
  // d_q over q's own memory.
  Tensor<double> q_copy = p.q;
  expect_rejected(
      [&] {
        reference::attention_backward(Full{}, q_copy.cview(), p.k.cview(), p.v.cview(), d_out.cview(), q_copy.view,
                                      d_k.view, d_v.view);
      },
      "d_q must not overlap q");
  Options bad_slopes;
  bad_slopes.alibi_slopes = {0.5};
  expect_rejected(
      [&] {
        reference::attention_backward(Full{}, p.q.cview(), p.k.cview(), p.v.cview(), d_out.cview(), d_q.view, d_k.view,
                                      d_v.view, bad_slopes);
      },
      "options.alibi_slopes.size()");
}

}  // namespace
}  // namespace attnkit::testing
