// attnkit::dispatch (the compiled component): which targets the CPU runs, the override, and
// every kind on every target the machine runs against the float64 reference, on tensors and
// over KV caches.

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <variant>

#include "attnkit/cache/sequence_pattern.hpp"
#include "attnkit/core/errors.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/dispatch.hpp"
#include "attnkit/pattern/dilated.hpp"
#include "attnkit/pattern/full.hpp"
#include "attnkit/pattern/global.hpp"
#include "attnkit/pattern/kernelized_rpe.hpp"
#include "attnkit/pattern/kinds.hpp"
#include "attnkit/pattern/linformer.hpp"
#include "attnkit/pattern/schedule.hpp"
#include "attnkit/pattern/sliding_window.hpp"
#include "attnkit/reference/attention.hpp"
#include "attnkit/reference/decode.hpp"
#include "dispatch/dispatch_kinds.hpp"
#include "support/accuracy.hpp"
#include "support/test_cache.hpp"
#include "support/test_data.hpp"

namespace attnkit::testing {
namespace {

/// The xsimd architecture each target's kernels must have been compiled for.
std::string expected_arch(SimdTarget target) {
  switch (target) {
    case SimdTarget::kSse2:
      return "sse2";
    case SimdTarget::kAvx2:
      return "fma3+avx2";
    case SimdTarget::kAvx512:
      return "avx512bw";
  }
  return "";
}

/// Restores the target a test started with.
class Dispatch : public ::testing::Test {
 protected:
  void TearDown() override { dispatch::set_simd_target(initial_); }
  SimdTarget initial_ = dispatch::simd_target();
};

TEST_F(Dispatch, SupportedTargetsAreTheCpusLevels) {
  const std::vector<SimdTarget> targets = dispatch::supported_simd_targets();
  ASSERT_FALSE(targets.empty());
  EXPECT_EQ(targets.front(), SimdTarget::kSse2);
  for (std::size_t t = 1; t < targets.size(); ++t) EXPECT_LT(targets[t - 1], targets[t]);
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
  // GCC's own CPUID reading (libgcc), independent of simd/cpu_features.hpp.
  __builtin_cpu_init();
  const bool v3 = __builtin_cpu_supports("x86-64-v3") != 0, v4 = __builtin_cpu_supports("x86-64-v4") != 0;
  EXPECT_EQ(targets.size(), std::size_t{1} + (v3 ? 1 : 0) + (v4 ? 1 : 0));
  EXPECT_EQ(runs_on(SimdTarget::kAvx2, simd::detect_cpu_levels()), v3);
  EXPECT_EQ(runs_on(SimdTarget::kAvx512, simd::detect_cpu_levels()), v4);
#endif
}

TEST_F(Dispatch, EachTargetRunsCodeCompiledForIt) {
  for (SimdTarget target : dispatch::supported_simd_targets()) {
    dispatch::set_simd_target(target);
    EXPECT_EQ(dispatch::simd_target(), target);
    EXPECT_EQ(std::string(dispatch::kernel_table().arch), expected_arch(target)) << simd_target_name(target);
  }
}

TEST_F(Dispatch, TargetsTheCpuDoesNotRunAreRefusedAndChangeNothing) {
  const std::vector<SimdTarget> supported = dispatch::supported_simd_targets();
  if (supported.size() == kSimdTargets.size()) GTEST_SKIP() << "this CPU runs every target";
  const SimdTarget before = dispatch::simd_target();
  try {
    dispatch::set_simd_target(SimdTarget::kAvx512);
    ADD_FAILURE() << "no exception";
  } catch (const attnkit::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("simd target = avx512"), std::string::npos) << e.what();
  }
  EXPECT_EQ(dispatch::simd_target(), before);
}

TEST(SimdTargetNames, RoundTrip) {
  for (SimdTarget target : kSimdTargets) EXPECT_EQ(parse_simd_target(simd_target_name(target)), target);
  EXPECT_FALSE(parse_simd_target("avx").has_value());
  EXPECT_FALSE(parse_simd_target("").has_value());
}

/// The checks behind set_simd_target and ATTNKIT_SIMD_TARGET, on CPUs this machine may not
/// be: SSE2 only, and AVX2 without AVX-512.
TEST(SimdTargetChecks, RefuseWhatTheCpuDoesNotRunAndNamesWhatItRuns) {
  const simd::CpuLevels sse2_only{}, avx2_only{.x86_64_v3 = true, .x86_64_v4 = false}, avx512{true, true};
  EXPECT_EQ(targets_run_by(sse2_only), std::vector<SimdTarget>{SimdTarget::kSse2});
  EXPECT_EQ(targets_run_by(avx512), std::vector<SimdTarget>(kSimdTargets.begin(), kSimdTargets.end()));
  const auto message = [](auto&& call) {
    try {
      call();
    } catch (const attnkit::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no exception");
  };
  EXPECT_EQ(require_runs_on(SimdTarget::kAvx2, avx2_only, "simd target"), SimdTarget::kAvx2);
  EXPECT_EQ(message([&] { require_runs_on(SimdTarget::kAvx512, avx2_only, "simd target"); }),
            "attnkit: simd target = avx512: this CPU (or its OS) does not run it; it runs sse2, avx2");
  EXPECT_EQ(message([&] { require_runs_on(SimdTarget::kAvx2, sse2_only, "simd target"); }),
            "attnkit: simd target = avx2: this CPU (or its OS) does not run it; it runs sse2");

  EXPECT_EQ(forced_simd_target(nullptr, avx512), std::nullopt);
  EXPECT_EQ(forced_simd_target("", avx512), std::nullopt);
  EXPECT_EQ(forced_simd_target("avx2", avx512), SimdTarget::kAvx2);
  EXPECT_EQ(message([&] { forced_simd_target("avx512", avx2_only); }),
            "attnkit: ATTNKIT_SIMD_TARGET = avx512: this CPU (or its OS) does not run it; it runs sse2, avx2");
  EXPECT_EQ(message([&] { forced_simd_target("AVX2", avx512); }),
            "attnkit: ATTNKIT_SIMD_TARGET = AVX2: must be sse2, avx2 or avx512");
}

/// Run by ctest with and without ATTNKIT_SIMD_TARGET (tests/CMakeLists.txt): unset, the
/// widest target the CPU runs; a target the CPU runs, that one (its kernels, its results
/// within tolerance); anything else, an attnkit::invalid_argument naming the variable and its
/// value from every dispatched call.
TEST(DispatchEnvironment, OverrideChoosesTheTargetOrFailsClearly) {
  const char* forced = std::getenv("ATTNKIT_SIMD_TARGET");
  const std::vector<SimdTarget> supported = dispatch::supported_simd_targets();
  if (forced == nullptr || *forced == '\0') {
    EXPECT_EQ(dispatch::simd_target(), supported.back());
    return;
  }
  const std::optional<SimdTarget> named = parse_simd_target(forced);
  if (named && runs_on(*named, simd::detect_cpu_levels())) {
    EXPECT_EQ(dispatch::simd_target(), *named);
    EXPECT_EQ(std::string(dispatch::kernel_table().arch), expected_arch(*named));
    // The forced target's results, against the reference (tolerances of the tests below).
    const Problem<float> p = make_problem<float>({1, 4, 2, 70, 90, 12, 20}, InputSet::kNormal, 9);
    for (const AnyKind& pattern : std::vector<AnyKind>{Full{}, SlidingWindow(8, 3)}) {
      Tensor<float> out(1, 4, 70, 20, Layout::kBHLD), ref = out;
      dispatch::attention(pattern, p.q.cview(), p.k.cview(), p.v.cview(), out.view);
      reference::attention(pattern, p.q.cview(), p.k.cview(), p.v.cview(), ref.view);
      EXPECT_TRUE(all_close(out, ref, Tolerance{2e-5 * max_abs(p.v), 1e-4})) << forced;
    }
    return;
  }
  for (int attempt = 0; attempt < 2; ++attempt) {
    try {
      dispatch::simd_target();
      ADD_FAILURE() << "no exception for ATTNKIT_SIMD_TARGET=" << forced;
    } catch (const attnkit::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("ATTNKIT_SIMD_TARGET = ") + forced), std::string::npos)
          << e.what();
    }
  }
  const Problem<float> p = make_problem<float>({1, 1, 1, 8, 8, 4, 4}, InputSet::kNormal, 1);
  Tensor<float> out(1, 1, 8, 4, Layout::kBHLD);
  out.data.assign(out.data.size(), 7.0f);
  EXPECT_THROW(dispatch::attention(Full{}, p.q.cview(), p.k.cview(), p.v.cview(), out.view), attnkit::invalid_argument);
  for (float x : out.data) ASSERT_EQ(x, 7.0f) << "written before the error";
}

/// Every dispatched kind on every target this CPU runs (as std::variant patterns, a Schedule layer),
/// float, double and half (E: q, k, v; Out: out), with the lse, against reference::attention (SPEC.md section 11:
/// float atol 2e-5 max|V| and rtol 1e-4, double 1e-12; the log-sum-exp 2e-5 / 1e-12 absolute). Half calls compare
/// with the reference of their values widened to float (exact; LSH then hashes them as the kernels do) and add the
/// rounding of a half out (output_rounding, SPEC.md section 12). KernelizedRpe takes
/// the direct path, whose positive features keep every denominator the size of its terms.
template <class E, class Out = E>
void expect_every_kind_matches_reference() {
  using T = compute_type_t<E>;
  const AttentionShape s{2, 4, 4, kDispatchLength, kDispatchLength, 16, 24};
  const Problem<T> source = make_problem<T>(s, InputSet::kNormal, 21);
  const Tensor<E> q = converted<E>(source.q, Layout::kBHLD), v = converted<E>(source.v, Layout::kBHLD);
  const Tensor<T> wide_q = converted<T>(q, Layout::kBHLD), wide_v = converted<T>(v, Layout::kBHLD);
  const double tight = std::is_same_v<T, float> ? 2e-5 : 1e-12;
  const double relative = (std::is_same_v<T, float> ? 1e-4 : 1e-12) + output_rounding<Out>();
  const std::vector<AnyKind> kinds = dispatch_kinds();
  for (SimdTarget target : dispatch::supported_simd_targets()) {
    dispatch::set_simd_target(target);
    for (std::size_t kind = 0; kind < kinds.size(); ++kind) {
      Tensor<Out> out(s.batch, s.q_heads, s.q_len, s.value_dim, Layout::kBHLD);
      Tensor<T> ref(s.batch, s.q_heads, s.q_len, s.value_dim, Layout::kBHLD);
      Tensor<T> lse(s.batch, s.q_heads, s.q_len, 1, Layout::kBHLD), ref_lse = lse;
      const bool has_lse = !std::holds_alternative<KernelizedRpe>(kinds[kind]);
      if (has_lse) {
        dispatch::attention(kinds[kind], q.cview(), q.cview(), v.cview(), out.view, lse.view);
        reference::attention(kinds[kind], wide_q.cview(), wide_q.cview(), wide_v.cview(), ref.view, ref_lse.view);
        EXPECT_TRUE(all_close(lse, ref_lse, Tolerance{tight, 0})) << simd_target_name(target) << " kind " << kind;
      } else {
        dispatch::attention(kinds[kind], q.cview(), q.cview(), v.cview(), out.view);
        reference::attention(kinds[kind], wide_q.cview(), wide_q.cview(), wide_v.cview(), ref.view);
      }
      EXPECT_TRUE(all_close(converted<T>(out, Layout::kBHLD), ref, Tolerance{tight * max_abs(wide_v), relative}))
          << simd_target_name(target) << " kind " << kind;
    }
  }
}

TEST_F(Dispatch, EveryKindOnEveryTargetMatchesTheReferenceFloat) { expect_every_kind_matches_reference<float>(); }
TEST_F(Dispatch, EveryKindOnEveryTargetMatchesTheReferenceDouble) { expect_every_kind_matches_reference<double>(); }
TEST_F(Dispatch, EveryKindOnEveryTargetMatchesTheReferenceHalf) {
  expect_every_kind_matches_reference<bfloat16>();
  expect_every_kind_matches_reference<bfloat16, float>();
  expect_every_kind_matches_reference<float16>();
  expect_every_kind_matches_reference<float16, float>();
}

/// The kinds that take Lq != Lk on every target, with shapes that leave tails in every
/// vector width: D = 5 and Dv = 7 (no whole SSE2 vector), Lq = 37 against Lk = 53, grouped
/// query heads, [B, L, H, D] strides, normal and peaky logits; with the lse. Tolerances as above.
template <class T>
void expect_odd_shapes_match_reference(InputSet set) {
  const AttentionShape s{2, 4, 2, 37, 53, 5, 7};
  const Problem<T> p = make_problem<T>(s, set, 5, Layout::kBLHD);
  const double tight = std::is_same_v<T, float> ? 2e-5 : 1e-12, relative = std::is_same_v<T, float> ? 1e-4 : 1e-12;
  const std::vector<AnyKind> kinds{Full{.causal = true}, SlidingWindow(4, 9), Dilated::symmetric(3, {1, 2, 3, 4}),
                                   Global({0, 9, 36}), Linformer::gaussian(16, 64, 2, 7)};
  for (SimdTarget target : dispatch::supported_simd_targets()) {
    dispatch::set_simd_target(target);
    for (std::size_t kind = 0; kind < kinds.size(); ++kind) {
      Tensor<T> out(s.batch, s.q_heads, s.q_len, s.value_dim, Layout::kBLHD), ref = out;
      Tensor<T> lse(s.batch, s.q_heads, s.q_len, 1, Layout::kBHLD), ref_lse = lse;
      dispatch::attention(kinds[kind], p.q.cview(), p.k.cview(), p.v.cview(), out.view, lse.view);
      reference::attention(kinds[kind], p.q.cview(), p.k.cview(), p.v.cview(), ref.view, ref_lse.view);
      EXPECT_TRUE(all_close(out, ref, Tolerance{tight * max_abs(p.v), relative}))
          << simd_target_name(target) << " kind " << kind;
      EXPECT_TRUE(all_close(lse, ref_lse, Tolerance{tight, 0})) << simd_target_name(target) << " kind " << kind;
    }
  }
}

TEST_F(Dispatch, OddShapesOnEveryTargetMatchTheReferenceFloat) {
  for (InputSet set : {InputSet::kNormal, InputSet::kPeaky}) expect_odd_shapes_match_reference<float>(set);
}
TEST_F(Dispatch, OddShapesOnEveryTargetMatchTheReferenceDouble) {
  expect_odd_shapes_match_reference<double>(InputSet::kNormal);
}

/// Every dispatched kind over a paged cache of element type E (shuffled pages, a page shared by
/// both sequences, ragged lengths, Lq = 3, GQA) on every target this CPU runs, as a Schedule
/// layer: the kinds that decode against reference::attention over the same cache (SPEC.md
/// section 13's tolerance, decode_tolerance), the others refused by name with out untouched.
template <class E, class Q, class Out>
void expect_every_kind_decodes_or_is_refused() {
  const index_t batch = 2, q_heads = 4, kv_heads = 2, q_len = 3, dim = 32;
  TestCache<E> cache(batch, kv_heads, kDispatchLength, dim, dim, true, 20, true);
  cache.fill(kDispatchLength, 11, {kDispatchLength, 57});
  const std::vector<Q> q = make_queries<Q>(batch * q_heads * q_len * dim, 12);
  const auto qv = bhld(q.data(), batch, q_heads, q_len, dim);
  const std::vector<AnyKind> kinds = dispatch_kinds();
  for (SimdTarget target : dispatch::supported_simd_targets()) {
    dispatch::set_simd_target(target);
    for (std::size_t kind = 0; kind < kinds.size(); ++kind) {
      std::vector<Out> out(static_cast<std::size_t>(batch * q_heads * q_len * dim), store_as<Out>(7.0f));
      std::vector<float> lse(static_cast<std::size_t>(batch * q_heads * q_len), 7.0f);
      const auto out_view = bhld(out.data(), batch, q_heads, q_len, dim);
      const auto lse_out = bhld(lse.data(), batch, q_heads, q_len, 1);
      const std::string label = std::string(simd_target_name(target)) + " kind " + std::to_string(kind);
      std::visit(
          [&]<class Held>(const Held&) {
            if constexpr (DecodablePattern<Held>) {
              dispatch::attention(kinds[kind], qv, cache.paged_view(), out_view, lse_out);
              std::vector<double> ref(out.size()), ref_lse(lse.size()), got(out.size()), got_lse(lse.size());
              TensorView<double> ref_lse_view = bhld(ref_lse.data(), batch, q_heads, q_len, 1);
              reference::attention(std::get<Held>(kinds[kind]), qv, cache.paged_view(),
                                   bhld(ref.data(), batch, q_heads, q_len, dim), ref_lse_view);
              for (std::size_t i = 0; i < out.size(); ++i) got[i] = static_cast<double>(widen(out[i]));
              for (std::size_t i = 0; i < lse.size(); ++i) got_lse[i] = lse[i];
              EXPECT_TRUE(all_close<double>(bhld(got.data(), batch, q_heads, q_len, dim),
                                            bhld(ref.data(), batch, q_heads, q_len, dim), decode_tolerance<Out>()))
                  << label;
              EXPECT_TRUE(all_close<double>(bhld(got_lse.data(), batch, q_heads, q_len, 1),
                                            bhld(ref_lse.data(), batch, q_heads, q_len, 1), Tolerance{2e-5, 1e-6}))
                  << label << " (lse)";
            } else {
              try {
                dispatch::attention(kinds[kind], qv, cache.paged_view(), out_view, lse_out);
                ADD_FAILURE() << label << ": no error for a kind that cannot decode";
              } catch (const attnkit::invalid_argument& e) {
                EXPECT_NE(std::string(e.what()).find(Kinds::name_of<Held>()), std::string::npos) << e.what();
              }
              for (std::size_t i = 0; i < out.size(); ++i) ASSERT_EQ(widen(out[i]), 7.0f) << label << ": written";
              for (float x : lse) ASSERT_EQ(x, 7.0f) << label << ": lse written";
            }
          },
          kinds[kind]);
    }
  }
}

TEST_F(Dispatch, EveryKindOverACacheOnEveryTargetDecodesOrIsRefused) {
  expect_every_kind_decodes_or_is_refused<float, float, float>();
  expect_every_kind_decodes_or_is_refused<bfloat16, bfloat16, bfloat16>();
  expect_every_kind_decodes_or_is_refused<float16, float16, float>();
  expect_every_kind_decodes_or_is_refused<q8_0_block, float, float>();
}

/// Packed sequences on every target: each registered kind's rows equal the target's own call on
/// that sequence alone bit for bit (mask kinds; sequences of 48, 16 and 32 tokens), and the
/// others are refused with nothing written.
TEST_F(Dispatch, PackedSequencesOnEveryTargetAreEachSequencesOwnCall) {
  const index_t heads = 4, dim = 16;  // the examples' heads (dispatch_kinds)
  const std::vector<index_t> offsets{0, 48, 64, 96};
  const std::vector<float> q = make_queries<float>(heads * 96 * dim, 31), k = make_queries<float>(heads * 96 * dim, 32),
                           v = make_queries<float>(heads * 96 * dim, 33);
  const auto rows = [&](const std::vector<float>& x, index_t total, index_t first, index_t count) {
    std::vector<float> copy;
    for (index_t h = 0; h < heads; ++h)
      copy.insert(copy.end(), x.begin() + (h * total + first) * dim, x.begin() + (h * total + first + count) * dim);
    return copy;
  };
  const std::vector<AnyKind> kinds = dispatch_kinds();
  for (SimdTarget target : dispatch::supported_simd_targets()) {
    dispatch::set_simd_target(target);
    for (std::size_t kind = 0; kind < kinds.size(); ++kind) {
      const std::string label = std::string(simd_target_name(target)) + " kind " + std::to_string(kind);
      std::vector<float> out(static_cast<std::size_t>(heads * 96 * dim), 7.0f);
      const auto packed_call = [&] {
        dispatch::attention(kinds[kind], bhld(q.data(), 1, heads, 96, dim), offsets, bhld(k.data(), 1, heads, 96, dim),
                            bhld(v.data(), 1, heads, 96, dim), offsets, bhld(out.data(), 1, heads, 96, dim));
      };
      const bool masked =
          std::visit([](const auto& held) { return MaskedPattern<std::decay_t<decltype(held)>>; }, kinds[kind]);
      if (!masked) {
        EXPECT_THROW(packed_call(), attnkit::invalid_argument) << label;
        for (float x : out) ASSERT_EQ(x, 7.0f) << label << ": written";
        continue;
      }
      packed_call();
      for (std::size_t b = 0; b + 1 < offsets.size(); ++b) {
        const index_t first = offsets[b], count = offsets[b + 1] - first, keys = count;
        const std::vector<float> qs = rows(q, 96, first, count), ks = rows(k, 96, first, keys),
                                 vs = rows(v, 96, first, keys);
        std::vector<float> alone(static_cast<std::size_t>(heads * count * dim));
        std::visit(
            [&](const auto& held) {
              if constexpr (MaskedPattern<std::decay_t<decltype(held)>>) {
                dispatch::attention(sequence_prefix(held, keys), bhld(qs.data(), 1, heads, count, dim),
                                    bhld(ks.data(), 1, heads, keys, dim), bhld(vs.data(), 1, heads, keys, dim),
                                    bhld(alone.data(), 1, heads, count, dim));
              }
            },
            kinds[kind]);
        for (index_t h = 0; h < heads; ++h)
          ASSERT_EQ(std::memcmp(out.data() + (h * 96 + first) * dim, alone.data() + h * count * dim,
                                sizeof(float) * static_cast<std::size_t>(count * dim)),
                    0)
              << label << " sequence " << b << " head " << h;
      }
    }
  }
}

}  // namespace
}  // namespace attnkit::testing
