// bfloat16 and float16 calls (docs/SPEC.md section 12): every kind against the float64
// reference on the half values widened exactly, with INFERENCE.md's tolerances (float out:
// SPEC.md section 11's; half out: plus half an ulp of the output type), in GQA, BLHD and
// Lq != Lk shapes; the tiled kinds bit for bit equal to the float call on the widened values;
// thread invariance, empty rows, unread non-finite rows and bad input.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "attnkit/attention.hpp"
#include "attnkit/core/half.hpp"
#include "attnkit/global_projections.hpp"
#include "attnkit/pattern/intersection.hpp"
#include "attnkit/pattern/kinds.hpp"
#include "attnkit/pattern/per_head.hpp"
#include "attnkit/pattern/schedule.hpp"
#include "attnkit/pattern/union.hpp"
#include "attnkit/reference/attention.hpp"
#include "attnkit/reference/lsh.hpp"
#include "support/accuracy.hpp"
#include "support/plan_checks.hpp"
#include "support/rpe_accuracy.hpp"
#include "support/test_data.hpp"

namespace attnkit::testing {
namespace {

/// A call's inputs rounded to E, and those values widened exactly to float and double.
template <class E>
struct HalfProblem {
  HalfProblem(const AttentionShape& s, InputSet set, std::uint64_t seed, Layout layout)
      : shape(s),
        source(make_problem<float>(s, set, seed, layout)),
        q(converted<E>(source.q, layout)),
        k(converted<E>(source.k, layout)),
        v(converted<E>(source.v, layout)),
        q32(converted<float>(q, layout)),
        k32(converted<float>(k, layout)),
        v32(converted<float>(v, layout)),
        q64(converted<double>(q, layout)),
        k64(converted<double>(k, layout)),
        v64(converted<double>(v, layout)) {}
  AttentionShape shape;
  Problem<float> source;
  Tensor<E> q, k, v;
  Tensor<float> q32, k32, v32;
  Tensor<double> q64, k64, v64;
};

/// A half call with out of type Out against the float64 reference `ref` (and `ref_lse`) on
/// its widened values: elementwise atol 2e-5 max|V| (plus the rounding of +1e4 logits, as for
/// float calls), rtol 1e-4 plus the output type's rounding; lse within 2e-5; for float out of
/// a mask kind also SPEC.md section 11's RMS rule against the naive float evaluation `naive`.
template <class Out, class E, class P>
void expect_out_matches(const P& pattern, const HalfProblem<E>& p, InputSet set, Layout layout,
                        const Tensor<double>& ref, const Tensor<double>& ref_lse, const Tensor<float>* naive) {
  const AttentionShape& s = p.shape;
  Tensor<Out> out(s.batch, s.q_heads, s.q_len, s.value_dim, layout);
  Tensor<float> lse(s.batch, s.q_heads, s.q_len, 1, Layout::kBHLD);
  attention(pattern, p.q.cview(), p.k.cview(), p.v.cview(), out.view, lse.view);
  const Tensor<double> out64 = converted<double>(out, layout);
  const double v_max = std::max(max_abs(p.v64), 1e-30);
  const double logit_rounding =
      set == InputSet::kOffset ? 4 * std::sqrt(static_cast<double>(s.head_dim)) * 0x1p-24 * max_abs(ref_lse) : 0.0;
  EXPECT_TRUE(all_close(out64, ref, Tolerance{(2e-5 + logit_rounding) * v_max, 1e-4 + output_rounding<Out>()}));
  EXPECT_TRUE(all_close(converted<double>(lse, Layout::kBHLD), ref_lse, Tolerance{2e-5, 2e-5}));
  if (naive != nullptr) {
    const double naive_error = rms_difference(converted<double>(*naive, layout), ref);
    EXPECT_LE(rms_difference(out64, ref), 2 * naive_error + 1e-6) << "naive float RMS error " << naive_error;
  }
}

/// Inputs rounded to E: the reference (and, for mask kinds, the naive float evaluation) once,
/// then the call with out in E and in float.
template <class E, class P>
void expect_half_matches_reference(const P& pattern, const AttentionShape& s, InputSet set, std::uint64_t seed,
                                   Layout layout) {
  const HalfProblem<E> p(s, set, seed, layout);
  Tensor<double> ref(s.batch, s.q_heads, s.q_len, s.value_dim, layout);
  Tensor<double> ref_lse(s.batch, s.q_heads, s.q_len, 1, Layout::kBHLD);
  reference::attention(pattern, p.q64.cview(), p.k64.cview(), p.v64.cview(), ref.view, ref_lse.view);
  std::optional<Tensor<float>> naive;
  if constexpr (MaskedPattern<P>) {
    if (set != InputSet::kOffset) {
      naive.emplace(s.batch, s.q_heads, s.q_len, s.value_dim, layout);
      reference::detail::dense_attention<float, float>(pattern, p.q32.cview(), p.k32.cview(), p.v32.cview(),
                                                       naive->view, nullptr, Options{});
    }
  }
  {
    SCOPED_TRACE("half out");
    expect_out_matches<E>(pattern, p, set, layout, ref, ref_lse, nullptr);
  }
  {
    SCOPED_TRACE("float out");
    expect_out_matches<float>(pattern, p, set, layout, ref, ref_lse, naive ? &*naive : nullptr);
  }
}

/// Both input types (each with half and float out) of one pattern and case.
template <class P>
void expect_all_types_match(const P& pattern, const AttentionShape& s, InputSet set, std::uint64_t seed,
                            Layout layout = Layout::kBHLD) {
  {
    SCOPED_TRACE("bfloat16 in");
    expect_half_matches_reference<bfloat16>(pattern, s, set, seed, layout);
  }
  // float16 cannot hold the +1e4 offset set's q[:, 0] = 1e4 / sigma (> 65504 for D >= 43).
  if (set == InputSet::kOffset) return;
  {
    SCOPED_TRACE("float16 in");
    expect_half_matches_reference<float16>(pattern, s, set, seed, layout);
  }
}

/// The shapes every kind runs on: GQA (Hq = 2 Hk) at a SPEC length, BLHD storage, and
/// Lq != Lk with Dv != D.
const AttentionShape kGroupedShape{1, 4, 2, 300, 300, 64, 64};
const AttentionShape kRectangularShape{1, 2, 2, 77, 300, 32, 48};

template <class P>
void expect_kind_matches(const P& pattern, bool rectangular = true) {
  {
    SCOPED_TRACE("GQA, normal");
    expect_all_types_match(pattern, kGroupedShape, InputSet::kNormal, 11);
  }
  {
    SCOPED_TRACE("GQA, peaky, BLHD");
    expect_all_types_match(pattern, kGroupedShape, InputSet::kPeaky, 12, Layout::kBLHD);
  }
  {
    SCOPED_TRACE("GQA, +1e4 offset");
    expect_all_types_match(pattern, kGroupedShape, InputSet::kOffset, 13);
  }
  if (rectangular) {
    SCOPED_TRACE("Lq != Lk, Dv != D");
    expect_all_types_match(pattern, kRectangularShape, InputSet::kNormal, 14);
  }
}

TEST(HalfPrecision, FullMatchesReference) {
  expect_kind_matches(Full{});
  expect_kind_matches(Full{.causal = true});
}

TEST(HalfPrecision, SlidingWindowMatchesReference) {
  expect_kind_matches(SlidingWindow::symmetric(24));
  expect_kind_matches(SlidingWindow::causal(40));
}

TEST(HalfPrecision, DilatedMatchesReference) { expect_kind_matches(Dilated(8, 8, {3})); }

TEST(HalfPrecision, GlobalAndLongformerMatchReference) {
  expect_kind_matches(Global({0, 17, 70}));
  expect_kind_matches(Union{SlidingWindow::symmetric(16), Global({0, 17, 70})});
}

TEST(HalfPrecision, BlockSparseAndBigBirdMatchReference) {
  expect_kind_matches(BlockSparse::local(20, 15, true), false);
  expect_kind_matches(BigBird(20, 2, 7), false);
}

TEST(HalfPrecision, CombinatorsMatchReference) {
  expect_kind_matches(Intersection{BigBird(20, 2, 7), Full{.causal = true}}, false);
  expect_kind_matches(PerHead<Full, SlidingWindow>(
                          {Full{.causal = true}, SlidingWindow::symmetric(8), Full{}, SlidingWindow::causal(30)}),
                      false);
}

TEST(HalfPrecision, LinformerMatchesReference) { expect_kind_matches(Linformer::gaussian(48, 300, 1, 5)); }

TEST(HalfPrecision, ScheduleLayersMatchReference) {
  const auto schedule = Schedule::masformer(2, 1, SlidingWindow::causal(32));
  for (index_t layer = 0; layer < schedule.layers(); ++layer) {
    SCOPED_TRACE("layer " + std::to_string(layer));
    expect_all_types_match(schedule.at(layer), kGroupedShape, InputSet::kNormal, 21);
  }
}

/// A half-out call equals the float-out call rounded to nearest even, bit for bit (the kinds
/// that fold partial results keep them in float and narrow each row once).
template <class E, class P>
void expect_half_out_is_rounded_float_out(const P& pattern, const HalfProblem<E>& p, const Tensor<float>& wide,
                                          const TensorView<const E>& k, Layout layout) {
  const AttentionShape& s = p.shape;
  Tensor<E> narrow(s.batch, s.q_heads, s.q_len, s.value_dim, layout);
  attention(pattern, p.q.cview(), k, p.v.cview(), narrow.view);
  EXPECT_EQ(converted<float>(narrow, layout).data, converted<float>(converted<E>(wide, layout), layout).data);
}

/// LSH on half x (shared queries and keys): float out and lse against the reference given the
/// kernel's bucket ids (Lsh::hash of the half view, which hashes the widened values as the
/// kernel does; the reference of half views hashes in double, SPEC.md section 12), with the
/// float tolerances; half out the float out rounded.
template <class E>
void expect_lsh_matches(const Lsh& lsh, Layout layout) {
  const AttentionShape s{2, 2, 2, 300, 300, 48, 40};
  const HalfProblem<E> p(s, InputSet::kNormal, 101, layout);
  Tensor<float> out(s.batch, s.q_heads, s.q_len, s.value_dim, layout);
  Tensor<float> lse(s.batch, s.q_heads, s.q_len, 1, Layout::kBHLD);
  attention(lsh, p.q.cview(), p.q.cview(), p.v.cview(), out.view, lse.view);
  Tensor<double> ref(s.batch, s.q_heads, s.q_len, s.value_dim, layout);
  Tensor<double> ref_lse(s.batch, s.q_heads, s.q_len, 1, Layout::kBHLD);
  reference::lsh_attention<double>(lsh, lsh.hash<E>(p.q.cview()), p.q64.cview(), p.q64.cview(), p.v64.cview(), ref.view,
                                   ref_lse.view);
  EXPECT_TRUE(all_close(converted<double>(out, layout), ref, Tolerance{2e-5 * max_abs(p.v64), 1e-4}));
  // The self penalty's -1e5 logit in rows alone in their window: lse relative to its size.
  EXPECT_TRUE(all_close(converted<double>(lse, Layout::kBHLD), ref_lse, Tolerance{2e-5, 2e-5}));
  expect_half_out_is_rounded_float_out(lsh, p, out, p.q.cview(), layout);
}

TEST(HalfPrecision, LshMatchesReference) {
  Lsh lsh;
  lsh.chunk = 32;
  lsh.rounds = 2;
  lsh.seed = 5;
  expect_lsh_matches<bfloat16>(lsh, Layout::kBHLD);
  expect_lsh_matches<float16>(lsh, Layout::kBLHD);
  lsh.causal = true;
  lsh.rounds = 3;
  expect_lsh_matches<float16>(lsh, Layout::kBHLD);
  expect_lsh_matches<bfloat16>(lsh, Layout::kBLHD);
}

/// Kernelized RPE on half q, k, v: float out within SPEC.md section 11's numerator and
/// denominator rule of the float64 sums on the widened values; half out the float out rounded.
template <class E>
void expect_kernelized_rpe_matches(const KernelizedRpe& rpe, Layout layout) {
  const AttentionShape s{1, 4, 2, 300, 300, 32, 40};
  const HalfProblem<E> p(s, InputSet::kNormal, 111, layout);
  Tensor<float> out(s.batch, s.q_heads, s.q_len, s.value_dim, layout);
  attention(rpe, p.q.cview(), p.k.cview(), p.v.cview(), out.view);
  EXPECT_TRUE(rpe_matches_reference<float>(rpe, p.q32.cview(), p.k32.cview(), p.v32.cview(), out.cview()));
  expect_half_out_is_rounded_float_out(rpe, p, out, p.k.cview(), layout);
}

TEST(HalfPrecision, KernelizedRpeMatchesReference) {
  for (const RpeAlgorithm algorithm : {RpeAlgorithm::kFft, RpeAlgorithm::kDirect}) {
    SCOPED_TRACE(algorithm == RpeAlgorithm::kFft ? "FFT" : "direct");
    const KernelizedRpe rpe{.features = 16, .causal = algorithm == RpeAlgorithm::kFft, .algorithm = algorithm};
    expect_kernelized_rpe_matches<bfloat16>(rpe, Layout::kBHLD);
    expect_kernelized_rpe_matches<float16>(rpe, Layout::kBLHD);
  }
}

/// Longformer's separate global projections in E: the local pattern's rows against the
/// reference of the pattern, the global rows against full attention over Qg, Kg, Vg.
template <class E, class Out>
void expect_global_projections_match() {
  const AttentionShape s{1, 4, 2, 200, 200, 32, 32};
  const std::vector<index_t> tokens{0, 99, 150};
  const auto pattern = Union{SlidingWindow::symmetric(12), Global(tokens)};
  const HalfProblem<E> local(s, InputSet::kNormal, 31, Layout::kBHLD), global(s, InputSet::kNormal, 32, Layout::kBHLD);
  Tensor<Out> out(s.batch, s.q_heads, s.q_len, s.value_dim, Layout::kBHLD);
  attention(pattern, local.q.cview(), local.k.cview(), local.v.cview(),
            GlobalProjections<E>{global.q.cview(), global.k.cview(), global.v.cview()}, out.view);

  Tensor<double> expected(s.batch, s.q_heads, s.q_len, s.value_dim, Layout::kBHLD), global_rows = expected;
  reference::attention(pattern, local.q64.cview(), local.k64.cview(), local.v64.cview(), expected.view);
  reference::attention(Full{}, global.q64.cview(), global.k64.cview(), global.v64.cview(), global_rows.view);
  for (index_t b = 0; b < s.batch; ++b)
    for (index_t h = 0; h < s.q_heads; ++h)
      for (index_t token : tokens)
        for (index_t d = 0; d < s.value_dim; ++d) expected.at(b, h, token, d) = global_rows.at(b, h, token, d);
  const double v_max = std::max(max_abs(local.v64), max_abs(global.v64));
  EXPECT_TRUE(all_close(converted<double>(out, Layout::kBHLD), expected,
                        Tolerance{2e-5 * v_max, 1e-4 + output_rounding<Out>()}));
}

TEST(HalfPrecision, GlobalProjectionsMatchReference) {
  expect_global_projections_match<bfloat16, bfloat16>();
  expect_global_projections_match<bfloat16, float>();
  expect_global_projections_match<float16, float16>();
  expect_global_projections_match<float16, float>();
}

/// The tiled kinds widen half values exactly and then run the float kernels unchanged, so a
/// half call with float out equals the float call on the widened values bit for bit, and half
/// out is that result rounded to nearest even (SPEC.md section 12).
template <class E, class P>
void expect_same_bits_as_float_call(const P& pattern, const AttentionShape& s, Layout layout) {
  const HalfProblem<E> p(s, InputSet::kNormal, 41, layout);
  Tensor<float> expected(s.batch, s.q_heads, s.q_len, s.value_dim, layout), wide = expected;
  Tensor<float> expected_lse(s.batch, s.q_heads, s.q_len, 1, Layout::kBHLD), lse = expected_lse;
  Tensor<E> narrow(s.batch, s.q_heads, s.q_len, s.value_dim, layout);
  attention(pattern, p.q32.cview(), p.k32.cview(), p.v32.cview(), expected.view, expected_lse.view);
  attention(pattern, p.q.cview(), p.k.cview(), p.v.cview(), wide.view, lse.view);
  attention(pattern, p.q.cview(), p.k.cview(), p.v.cview(), narrow.view);
  EXPECT_EQ(wide.data, expected.data);
  EXPECT_EQ(lse.data, expected_lse.data);
  EXPECT_EQ(converted<float>(narrow, layout).data, converted<float>(converted<E>(expected, layout), layout).data);
}

TEST(HalfPrecision, TiledKindsComputeTheFloatCallOnWidenedValues) {
  for (const Layout layout : {Layout::kBHLD, Layout::kBLHD}) {
    expect_same_bits_as_float_call<bfloat16>(Full{.causal = true}, kGroupedShape, layout);
    expect_same_bits_as_float_call<float16>(Full{}, kRectangularShape, layout);
    expect_same_bits_as_float_call<bfloat16>(Union{SlidingWindow::symmetric(16), Global({3, 200})}, kGroupedShape,
                                             layout);
    expect_same_bits_as_float_call<float16>(Dilated(6, 6, {2}), kGroupedShape, layout);
    expect_same_bits_as_float_call<bfloat16>(BigBird(20, 2, 3), kGroupedShape, layout);
  }
}

/// One call, 1 and 2 threads: the same bits.
template <class E, class Out, class P>
void expect_thread_invariant(const P& pattern) {
  const AttentionShape s = kGroupedShape;
  const HalfProblem<E> p(s, InputSet::kNormal, 51, Layout::kBHLD);
  Tensor<Out> one(s.batch, s.q_heads, s.q_len, s.value_dim, Layout::kBHLD), two = one;
  attention(pattern, p.q.cview(), p.k.cview(), p.v.cview(), one.view, Options{.threads = 1});
  attention(pattern, p.q.cview(), p.k.cview(), p.v.cview(), two.view, Options{.threads = 2});
  EXPECT_EQ(converted<float>(one, Layout::kBHLD).data, converted<float>(two, Layout::kBHLD).data);
}

TEST(HalfPrecision, ResultsDoNotDependOnThreads) {
  expect_thread_invariant<bfloat16, bfloat16>(Union{SlidingWindow::symmetric(16), Global({0, 100})});
  expect_thread_invariant<float16, float>(Full{.causal = true});
  expect_thread_invariant<bfloat16, float>(Linformer::gaussian(48, 300, 1, 5));
}

/// Rows that attend no key: zeros and lse -inf, never NaN (a window of radius 0 over fewer
/// keys than queries leaves rows Lk .. Lq - 1 empty).
TEST(HalfPrecision, EmptyRowsGiveZerosAndMinusInfinity) {
  const AttentionShape s{1, 2, 2, 40, 25, 16, 16};
  const HalfProblem<float16> p(s, InputSet::kNormal, 61, Layout::kBHLD);
  Tensor<float16> out(s.batch, s.q_heads, s.q_len, s.value_dim, Layout::kBHLD);
  Tensor<float> lse(s.batch, s.q_heads, s.q_len, 1, Layout::kBHLD);
  attention(SlidingWindow(0, 0), p.q.cview(), p.k.cview(), p.v.cview(), out.view, lse.view);
  for (index_t h = 0; h < s.q_heads; ++h)
    for (index_t i = s.kv_len; i < s.q_len; ++i) {
      EXPECT_EQ(lse.at(0, h, i, 0), -std::numeric_limits<float>::infinity());
      for (index_t d = 0; d < s.value_dim; ++d) EXPECT_EQ(to_float(out.at(0, h, i, d)), 0.0f);
    }
}

/// NaN and Inf in K and V rows a query does not attend never reach its output: a causal call
/// with the last key row poisoned equals, on every other row, the call with that row zeroed.
TEST(HalfPrecision, UnreadNonFiniteRowsDoNotReachOutputs) {
  const AttentionShape s{1, 2, 1, 64, 64, 32, 32};
  HalfProblem<bfloat16> clean(s, InputSet::kNormal, 71, Layout::kBHLD), poisoned = clean;
  for (index_t d = 0; d < s.head_dim; ++d) {
    clean.k.at(0, 0, s.kv_len - 1, d) = clean.v.at(0, 0, s.kv_len - 1, d) = to_bfloat16(0.0f);
    poisoned.k.at(0, 0, s.kv_len - 1, d) = to_bfloat16(std::numeric_limits<float>::quiet_NaN());
    poisoned.v.at(0, 0, s.kv_len - 1, d) = to_bfloat16(d % 2 == 0 ? std::numeric_limits<float>::infinity() : -0.0f);
  }
  Tensor<bfloat16> expected(s.batch, s.q_heads, s.q_len, s.value_dim, Layout::kBHLD), out = expected;
  attention(Full{.causal = true}, clean.q.cview(), clean.k.cview(), clean.v.cview(), expected.view);
  attention(Full{.causal = true}, poisoned.q.cview(), poisoned.k.cview(), poisoned.v.cview(), out.view);
  for (index_t h = 0; h < s.q_heads; ++h)
    for (index_t i = 0; i + 1 < s.q_len; ++i)
      for (index_t d = 0; d < s.value_dim; ++d)
        ASSERT_EQ(out.at(0, h, i, d).bits, expected.at(0, h, i, d).bits) << "row " << i << " head " << h;
}

/// Bad input is rejected as for float calls, with nothing written.
TEST(HalfPrecision, BadInputIsRejectedAndNothingWritten) {
  const AttentionShape s{1, 2, 2, 16, 16, 8, 8};
  const HalfProblem<bfloat16> p(s, InputSet::kNormal, 81, Layout::kBHLD);
  Tensor<bfloat16> out(s.batch, s.q_heads, s.q_len, s.value_dim, Layout::kBHLD);
  std::fill(out.data.begin(), out.data.end(), to_bfloat16(7.0f));
  const std::vector<bfloat16> before = out.data;
  const auto unchanged = [&] {
    return std::equal(out.data.begin(), out.data.end(), before.begin(),
                      [](bfloat16 a, bfloat16 b) { return a.bits == b.bits; });
  };
  Tensor<bfloat16> short_k(1, 2, 16, 4, Layout::kBHLD);
  expect_invalid_argument([&] { attention(Full{}, p.q.cview(), short_k.cview(), p.v.cview(), out.view); },
                          "k.sizes[dim] = 4");
  EXPECT_TRUE(unchanged());
  Tensor<float> wrong_lse(1, 2, 15, 1, Layout::kBHLD);
  expect_invalid_argument([&] { attention(Full{}, p.q.cview(), p.k.cview(), p.v.cview(), out.view, wrong_lse.view); },
                          "lse.sizes[seq] = 15");
  EXPECT_TRUE(unchanged());
  expect_invalid_argument([&] { attention(SlidingWindow(-1, 2), p.q.cview(), p.k.cview(), p.v.cview(), out.view); },
                          "left");
  EXPECT_TRUE(unchanged());
}

/// reference::attention on half views equals the reference on the values widened to double.
TEST(HalfPrecision, ReferenceWidensHalfViewsExactly) {
  const AttentionShape s{1, 2, 1, 30, 40, 16, 8};
  const HalfProblem<float16> p(s, InputSet::kPeaky, 91, Layout::kBLHD);
  Tensor<double> direct(s.batch, s.q_heads, s.q_len, s.value_dim, Layout::kBHLD), widened = direct;
  Tensor<double> direct_lse(s.batch, s.q_heads, s.q_len, 1, Layout::kBHLD), widened_lse = direct_lse;
  const auto pattern = SlidingWindow::symmetric(5);
  reference::attention(pattern, p.q.cview(), p.k.cview(), p.v.cview(), direct.view, direct_lse.view);
  reference::attention(pattern, p.q64.cview(), p.k64.cview(), p.v64.cview(), widened.view, widened_lse.view);
  EXPECT_EQ(direct.data, widened.data);
  EXPECT_EQ(direct_lse.data, widened_lse.data);
  Tensor<float16> rounded(s.batch, s.q_heads, s.q_len, s.value_dim, Layout::kBHLD);
  reference::attention(pattern, p.q.cview(), p.k.cview(), p.v.cview(), rounded.view);
  EXPECT_EQ(converted<double>(rounded, Layout::kBHLD).data,
            converted<double>(converted<float16>(widened, Layout::kBHLD), Layout::kBHLD).data);
}

}  // namespace
}  // namespace attnkit::testing
