// attnkit::dispatch against attnkit::attention compiled in this binary, bit for bit. ctest
// builds this file three times, with -march=x86-64, x86-64-v3 and x86-64-v4 (and the test
// preset's other flags), so each binary's header kernels are a "-march build" of one target;
// the dispatched kernels of that target must give the same bits, for every kind and element
// type (float, double, bfloat16 and float16 with half or float out), with and without the
// log-sum-exp, on 1 and 2 threads; and attention over KV caches of every element type,
// contiguous and paged, for every kind that decodes.

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <variant>

#include "attnkit/attention.hpp"
#include "attnkit/core/options.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/decode.hpp"
#include "attnkit/dispatch.hpp"
#include "attnkit/pattern/kernelized_rpe.hpp"
#include "attnkit/pattern/kinds.hpp"
#include "dispatch/dispatch_kinds.hpp"
#include "support/test_cache.hpp"
#include "support/test_data.hpp"

namespace attnkit::testing {
namespace {

/// The target this binary's own flags build.
constexpr SimdTarget kThisBuild =
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
    SimdTarget::kAvx512;
#elif defined(__AVX2__) && defined(__FMA__)
    SimdTarget::kAvx2;
#else
    SimdTarget::kSse2;
#endif

template <class T>
bool same_bits(const Tensor<T>& a, const Tensor<T>& b) {
  return a.data.size() == b.data.size() && std::memcmp(a.data.data(), b.data.data(), a.data.size() * sizeof(T)) == 0;
}

/// E: the element type of q, k, v; Out: of out (E, or float for half E).
template <class E, class Out = E>
void expect_bitwise_equal_to_this_build() {
  using T = compute_type_t<E>;
  if (!runs_on(kThisBuild, simd::detect_cpu_levels()))
    GTEST_SKIP() << "this CPU does not run " << simd_target_name(kThisBuild);
  // ctest sets ATTNKIT_SIMD_TARGET to this build's target, so that the override is what picks
  // it; run by hand without it, the test picks it itself.
  if (std::getenv("ATTNKIT_SIMD_TARGET") == nullptr) dispatch::set_simd_target(kThisBuild);
  ASSERT_EQ(dispatch::simd_target(), kThisBuild);
  ASSERT_EQ(std::string(dispatch::kernel_table().arch), std::string(simd::arch_name()));
  const AttentionShape s{1, 4, 4, kDispatchLength, kDispatchLength, 16, 24};
  const Problem<T> source = make_problem<T>(s, InputSet::kNormal, 33);
  const Tensor<E> q = converted<E>(source.q, Layout::kBHLD), v = converted<E>(source.v, Layout::kBHLD);
  const std::vector<AnyKind> kinds = dispatch_kinds();
  for (std::size_t kind = 0; kind < kinds.size(); ++kind) {
    for (int threads : {1, 2}) {
      const Options options{.threads = threads};
      Tensor<Out> mine(s.batch, s.q_heads, s.q_len, s.value_dim, Layout::kBHLD), dispatched = mine;
      Tensor<T> my_lse(s.batch, s.q_heads, s.q_len, 1, Layout::kBHLD), dispatched_lse = my_lse;
      std::visit(
          [&](const auto& pattern) {
            if constexpr (std::is_same_v<std::decay_t<decltype(pattern)>, KernelizedRpe>) {
              attention(pattern, q.cview(), q.cview(), v.cview(), mine.view, options);
              dispatch::attention(pattern, q.cview(), q.cview(), v.cview(), dispatched.view, options);
            } else {
              attention(pattern, q.cview(), q.cview(), v.cview(), mine.view, my_lse.view, options);
              dispatch::attention(pattern, q.cview(), q.cview(), v.cview(), dispatched.view, dispatched_lse.view,
                                  options);
            }
          },
          kinds[kind]);
      EXPECT_TRUE(same_bits(mine, dispatched))
          << simd_target_name(kThisBuild) << " kind " << kind << " threads " << threads;
      EXPECT_TRUE(same_bits(my_lse, dispatched_lse)) << simd_target_name(kThisBuild) << " kind " << kind;
    }
  }
}

TEST(DispatchMatchesThisBuild, Float) { expect_bitwise_equal_to_this_build<float>(); }
TEST(DispatchMatchesThisBuild, Double) { expect_bitwise_equal_to_this_build<double>(); }
TEST(DispatchMatchesThisBuild, Bfloat16) {
  expect_bitwise_equal_to_this_build<bfloat16>();
  expect_bitwise_equal_to_this_build<bfloat16, float>();
}
TEST(DispatchMatchesThisBuild, Float16) {
  expect_bitwise_equal_to_this_build<float16>();
  expect_bitwise_equal_to_this_build<float16, float>();
}

/// Decode over a cache of E with q of Q and out of Out: dispatched and this build's kernels
/// give the same bits for every kind that decodes, contiguous and paged, with the lse, on 1
/// and 2 threads.
template <class E, class Q, class Out>
void expect_decode_bitwise_equal_to_this_build() {
  if (!runs_on(kThisBuild, simd::detect_cpu_levels()))
    GTEST_SKIP() << "this CPU does not run " << simd_target_name(kThisBuild);
  if (std::getenv("ATTNKIT_SIMD_TARGET") == nullptr) dispatch::set_simd_target(kThisBuild);
  ASSERT_EQ(dispatch::simd_target(), kThisBuild);
  const index_t batch = 2, q_heads = 4, kv_heads = 2, q_len = 2, dim = 32;
  const std::vector<Q> q = make_queries<Q>(batch * q_heads * q_len * dim, 5);
  const auto qv = bhld(q.data(), batch, q_heads, q_len, dim);
  for (bool paged : {false, true}) {
    TestCache<E> cache(batch, kv_heads, kDispatchLength, dim, dim, paged, 20);
    cache.fill(kDispatchLength, 6, {kDispatchLength, 91});
    for (const AnyKind& kind : dispatch_kinds()) {
      std::visit(
          [&]<class Held>(const Held& held) {
            if constexpr (DecodablePattern<Held>) {
              for (int threads : {1, 2}) {
                const Options options{.threads = threads};
                std::vector<Out> mine(static_cast<std::size_t>(batch * q_heads * q_len * dim)), dispatched = mine;
                std::vector<float> my_lse(static_cast<std::size_t>(batch * q_heads * q_len)), dispatched_lse = my_lse;
                const auto run = [&](auto&& call, std::vector<Out>& out, std::vector<float>& lse) {
                  const auto out_view = bhld(out.data(), batch, q_heads, q_len, dim);
                  const auto lse_out = bhld(lse.data(), batch, q_heads, q_len, 1);
                  if (paged) {
                    call(cache.paged_view(), out_view, lse_out);
                  } else {
                    call(cache.contiguous(), out_view, lse_out);
                  }
                };
                run([&](const auto& c, auto o, auto l) { attention(held, qv, c, o, l, options); }, mine, my_lse);
                run([&](const auto& c, auto o, auto l) { dispatch::attention(held, qv, c, o, l, options); }, dispatched,
                    dispatched_lse);
                EXPECT_EQ(std::memcmp(mine.data(), dispatched.data(), mine.size() * sizeof(Out)), 0)
                    << simd_target_name(kThisBuild) << " " << Kinds::name_of<Held>() << " paged " << paged
                    << " threads " << threads;
                EXPECT_EQ(std::memcmp(my_lse.data(), dispatched_lse.data(), my_lse.size() * sizeof(float)), 0)
                    << simd_target_name(kThisBuild) << " " << Kinds::name_of<Held>() << " (lse)";
              }
            }
          },
          kind);
    }
  }
}

TEST(DispatchMatchesThisBuild, DecodeFloatCache) { expect_decode_bitwise_equal_to_this_build<float, float, float>(); }
TEST(DispatchMatchesThisBuild, DecodeHalfCaches) {
  expect_decode_bitwise_equal_to_this_build<bfloat16, bfloat16, bfloat16>();
  expect_decode_bitwise_equal_to_this_build<bfloat16, float, float>();
  expect_decode_bitwise_equal_to_this_build<float16, float16, float>();
  expect_decode_bitwise_equal_to_this_build<float16, float16, float16>();
}
TEST(DispatchMatchesThisBuild, DecodeQ8Cache) {
  expect_decode_bitwise_equal_to_this_build<q8_0_block, float, float>();
  expect_decode_bitwise_equal_to_this_build<q8_0_block, bfloat16, float>();
}

}  // namespace
}  // namespace attnkit::testing
