// Attention over KV caches with more query rows than the decode schedule takes (SPEC.md section
// 13, kernel/cache_prefill.hpp): the rows equal the last rows of the prefill call on each
// sequence's tokens bit for bit, match reference::attention for every pattern, cache type and
// layout, and a pattern that breaks a rule for one sequence writes nothing.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "attnkit/attnkit.hpp"
#include "support/accuracy.hpp"
#include "support/cache_checks.hpp"
#include "support/plan_checks.hpp"
#include "support/test_cache.hpp"
#include "support/test_data.hpp"

namespace attnkit::testing {
namespace {

constexpr index_t kRows = kDecodeScheduleRows + 36;  // the prefill schedule

// Every mask kind and combination over float caches, contiguous (also heads interleaved) and
// paged with a shared page; sequences of 613 tokens, 0, 40 (fewer than the rows: the first
// rows sit at negative positions) and 450; GQA.
TEST(CachePrefill, EveryPatternMatchesTheReference) {
  const index_t batch = 4, kv_heads = 2, q_heads = 4, capacity = 704, head_dim = 64, value_dim = 32;
  for (bool paged : {false, true}) {
    TestCache<float> cache(batch, kv_heads, capacity, head_dim, value_dim, paged, 16, true);
    cache.fill(capacity, 71, {613, 0, 40, 450});
    const std::vector<float> q = make_queries<float>(batch * q_heads * kRows * head_dim, 72);
    const auto check = [&](const auto& pattern, const std::string& name) {
      expect_views_match_reference<float>(pattern, q, q_heads, kRows, cache, name);
    };
    check(Full{}, "Full");
    check(Full{.causal = true}, "Full causal");
    check(SlidingWindow::streaming(64, 4), "StreamingLLM");
    check(Union{SlidingWindow::causal(64), Global({0, 1, 2, 3, 600})}, "Longformer");
    check(Dilated(16, 0, {1, 2, 3, 5}), "dilated");
    check(BlockSparse::local(64, 11, true), "causal block-diagonal");
    check(BigBird(64, 2, 7), "BigBird");
    check(PerHead<Full, SlidingWindow>({Full{.causal = true}, SlidingWindow::causal(8), SlidingWindow(30, 30), Full{}}),
          "per head");
    check(Intersection{SlidingWindow::symmetric(200), Full{.causal = true}}, "window and causal");
  }
}

// The rows are the last rows of the prefill call on the sequence's tokens, bit for bit: a
// float cache against attnkit::attention on the same keys as tensors, with the queries at the
// square's last positions (zeros before them), for kinds that plan by rows, by row runs and by
// reordered rows.
TEST(CachePrefill, RowsAreTheSquareCallsLastRowsBitForBit) {
  const index_t kv_heads = 2, q_heads = 4, length = 613, capacity = 640, head_dim = 64, value_dim = 64;
  TestCache<float> cache(1, kv_heads, capacity, head_dim, value_dim, false);
  cache.fill(capacity, 73, {length});
  const std::vector<float> q = make_queries<float>(q_heads * kRows * head_dim, 74);
  std::vector<float> square_q(static_cast<std::size_t>(q_heads * length * head_dim), 0.0f);
  for (index_t h = 0; h < q_heads; ++h)
    std::copy(q.begin() + h * kRows * head_dim, q.begin() + (h + 1) * kRows * head_dim,
              square_q.begin() + (h * length + length - kRows) * head_dim);
  const KvCache<float> view = cache.contiguous();
  const auto keys = TensorView<const float>(view.k.row(0, 0, 0), {1, kv_heads, length, head_dim}, view.k.strides());
  const auto values = TensorView<const float>(view.v.row(0, 0, 0), {1, kv_heads, length, value_dim}, view.v.strides());
  const auto check = [&](const auto& pattern, const std::string& name) {
    std::vector<float> rows(static_cast<std::size_t>(q_heads * kRows * value_dim));
    std::vector<float> square(static_cast<std::size_t>(q_heads * length * value_dim));
    attention(pattern, bhld(q.data(), 1, q_heads, kRows, head_dim), view,
              bhld(rows.data(), 1, q_heads, kRows, value_dim));
    attention(pattern, bhld(static_cast<const float*>(square_q.data()), 1, q_heads, length, head_dim), keys, values,
              bhld(square.data(), 1, q_heads, length, value_dim));
    for (index_t h = 0; h < q_heads; ++h)
      EXPECT_EQ(
          std::memcmp(rows.data() + h * kRows * value_dim, square.data() + (h * length + length - kRows) * value_dim,
                      static_cast<std::size_t>(kRows * value_dim) * sizeof(float)),
          0)
          << name << ", head " << h;
  };
  check(Full{.causal = true}, "Full causal");
  check(Union{SlidingWindow::causal(64), Global({0, 1, 2, 3, 600})}, "Longformer");
  check(Dilated(16, 0, {1, 2, 3, 5}), "dilated");
  check(BigBird(64, 2, 7), "BigBird");
}

// Half and 8-bit caches, contiguous and paged, half queries with out in their type and in
// float; score modifiers; the 8-bit query mode (its query rows quantized, then float scores).
TEST(CachePrefill, CacheTypesQueriesAndOptions) {
  const index_t batch = 2, kv_heads = 2, q_heads = 4, capacity = 320, head_dim = 64, value_dim = 32;
  Options modified;
  modified.softcap = 5;
  modified.alibi_slopes = alibi_slopes(q_heads);
  Options quantized;
  quantized.quantized_query = true;
  const auto pattern = SlidingWindow::streaming(100, 4);
  const auto run = [&]<class E>(std::type_identity<E>, const char* type) {
    for (bool paged : {false, true}) {
      TestCache<E> cache(batch, kv_heads, capacity, head_dim, value_dim, paged);
      cache.fill(capacity, 75, {300, 129});
      const std::vector<float> qf = make_queries<float>(batch * q_heads * kRows * head_dim, 76);
      const std::vector<bfloat16> qb = make_queries<bfloat16>(qf.size(), 77);
      const std::vector<float16> qh = make_queries<float16>(qf.size(), 78);
      const std::string label = std::string(type) + (paged ? ", paged" : ", contiguous");
      const auto check = [&](const auto& view) {
        expect_cache_call_matches_reference<bfloat16>(pattern, qb, q_heads, kRows, view, batch, head_dim, value_dim,
                                                      label + " bf16");
        expect_cache_call_matches_reference<float>(pattern, qh, q_heads, kRows, view, batch, head_dim, value_dim,
                                                   label + " fp16->f");
        expect_cache_call_matches_reference<float>(pattern, qf, q_heads, kRows, view, batch, head_dim, value_dim,
                                                   label + " modifiers", modified);
        if constexpr (std::is_same_v<E, q8_0_block>) {
          expect_cache_call_matches_reference<float>(pattern, qf, q_heads, kRows, view, batch, head_dim, value_dim,
                                                     label + " 8-bit query mode", quantized);
        }
      };
      if (paged) {
        check(cache.paged_view());
      } else {
        check(cache.contiguous());
      }
    }
  };
  run(std::type_identity<bfloat16>{}, "bf16");
  run(std::type_identity<float16>{}, "fp16");
  run(std::type_identity<q8_0_block>{}, "q8_0");
}

// Sequences holding no token, alone in the call or beside others, get zeros and lse -inf in
// every row on the prefill schedule too (found by the decode fuzzer: with no key in any
// prefill-scheduled sequence the rows were left unwritten).
TEST(CachePrefill, EmptySequencesGetZeros) {
  const index_t head_dim = 64;
  TestCache<float16> cache(2, 1, 64, head_dim, head_dim, true, 1, false);
  cache.fill(64, 87, {0, 0});
  const std::vector<float> q = make_queries<float>(2 * 5 * kRows * head_dim, 88);
  std::vector<float> out(q.size(), kNaN), lse(static_cast<std::size_t>(2 * 5 * kRows), 0.0f);
  attention(Full{}, bhld(q.data(), 2, 5, kRows, head_dim), cache.paged_view(), bhld(out.data(), 2, 5, kRows, head_dim),
            lse_view(lse.data(), 2, 5, kRows));
  EXPECT_EQ(out, std::vector<float>(out.size(), 0.0f));
  EXPECT_EQ(lse, std::vector<float>(lse.size(), -std::numeric_limits<float>::infinity()));
}

// The same bits for 1 and 2 threads.
TEST(CachePrefill, ThreadCountInvariance) {
  const index_t kv_heads = 2, q_heads = 8, capacity = 1024, head_dim = 64;
  TestCache<float16> cache(2, kv_heads, capacity, head_dim, head_dim, true, 64);
  cache.fill(capacity, 79, {1000, 700});
  const std::vector<float> q = make_queries<float>(2 * q_heads * kRows * head_dim, 80);
  const auto run = [&](int threads) {
    std::vector<float> out(q.size());
    Options options;
    options.threads = threads;
    attention(Full{.causal = true}, bhld(q.data(), 2, q_heads, kRows, head_dim), cache.paged_view(),
              bhld(out.data(), 2, q_heads, kRows, head_dim), options);
    return out;
  };
  EXPECT_EQ(run(1), run(2));
}

// A pattern that breaks a rule for the second sequence's length (a block layout of 3 blocks
// of 64 for 300 tokens) writes nothing, not even the first sequence's rows.
TEST(CachePrefill, RuleBrokenForOneSequenceWritesNothing) {
  const index_t head_dim = 32;
  TestCache<float> cache(2, 1, 320, head_dim, head_dim, false);
  cache.fill(320, 81, {150, 300});
  const std::vector<float> q = make_queries<float>(2 * kRows * head_dim, 82);
  std::vector<float> out(q.size(), 7.0f);
  const BlockSparse three_blocks = BlockSparse::local(64, 3);
  expect_invalid_argument(
      [&] {
        attention(three_blocks, bhld(q.data(), 2, 1, kRows, head_dim), cache.contiguous(),
                  bhld(out.data(), 2, 1, kRows, head_dim));
      },
      "block");
  EXPECT_EQ(out, std::vector<float>(q.size(), 7.0f));
}

}  // namespace
}  // namespace attnkit::testing

namespace attnkit::testing {
namespace {

// Packed rows, a different count per sequence (query_offsets, cu_seqlens_q): a 100-row chunk
// (prefill schedule), a one-row decode, an empty entry and a 3-row draft in one call, against
// the reference over the same packed rows, and each sequence's rows bit for bit those of a
// call over that sequence alone.
TEST(PackedRows, MixedCountsMatchTheReferenceAndSeparateCalls) {
  const index_t batch = 4, kv_heads = 2, q_heads = 4, capacity = 512, head_dim = 64, value_dim = 32;
  TestCache<float16> cache(batch, kv_heads, capacity, head_dim, value_dim, true, 16);
  cache.fill(capacity, 83, {500, 37, 0, 260});
  const std::vector<index_t> offsets{0, kRows, kRows + 1, kRows + 1, kRows + 4};
  const index_t total = offsets.back();
  const std::vector<float> q = make_queries<float>(q_heads * total * head_dim, 84);
  const auto qv = bhld(q.data(), 1, q_heads, total, head_dim);
  const auto check = [&](const auto& pattern, const std::string& name) {
    std::vector<float> out(static_cast<std::size_t>(q_heads * total * value_dim), 9.0f), lse(q_heads * total, 9.0f);
    attention(pattern, qv, offsets, cache.paged_view(), bhld(out.data(), 1, q_heads, total, value_dim),
              lse_view(lse.data(), 1, q_heads, total));
    std::vector<double> ref(out.size()), ref_lse(lse.size());
    reference::attention(pattern, qv, offsets, cache.paged_view(), bhld(ref.data(), 1, q_heads, total, value_dim),
                         lse_view(ref_lse.data(), 1, q_heads, total));
    const std::vector<double> got(out.begin(), out.end()), got_lse(lse.begin(), lse.end());
    EXPECT_TRUE(all_close<double>(bhld(got.data(), 1, q_heads, total, value_dim),
                                  bhld(ref.data(), 1, q_heads, total, value_dim), decode_tolerance<float>()))
        << name;
    EXPECT_TRUE(all_close<double>(bhld(got_lse.data(), 1, q_heads, total, 1),
                                  bhld(ref_lse.data(), 1, q_heads, total, 1), Tolerance{2e-5, 1e-6}))
        << name << " (lse)";
    // Each sequence alone: its block table row and length, its rows as [1, Hq, count, D].
    const PagedKvCache<float16> all = cache.paged_view();
    for (index_t b = 0; b < batch; ++b) {
      const index_t count = offsets[static_cast<std::size_t>(b) + 1] - offsets[static_cast<std::size_t>(b)];
      if (count == 0) continue;
      std::vector<index_t> length{cache.lengths[static_cast<std::size_t>(b)]};
      const PagedKvCache<float16> alone{all.k_pages, all.v_pages,
                                        PageTable{all.block_table.data + b * all.block_table.stride, 1,
                                                  all.block_table.pages_per_sequence, all.block_table.stride},
                                        length};
      std::vector<float> single_q(static_cast<std::size_t>(q_heads * count * head_dim));
      for (index_t h = 0; h < q_heads; ++h)
        std::copy_n(qv.row(0, h, offsets[static_cast<std::size_t>(b)]), count * head_dim,
                    single_q.begin() + h * count * head_dim);
      std::vector<float> single(static_cast<std::size_t>(q_heads * count * value_dim));
      attention(pattern, bhld(static_cast<const float*>(single_q.data()), 1, q_heads, count, head_dim), alone,
                bhld(single.data(), 1, q_heads, count, value_dim));
      for (index_t h = 0; h < q_heads; ++h)
        EXPECT_EQ(std::memcmp(single.data() + h * count * value_dim,
                              out.data() + (h * total + offsets[static_cast<std::size_t>(b)]) * value_dim,
                              static_cast<std::size_t>(count * value_dim) * sizeof(float)),
                  0)
            << name << ", sequence " << b << ", head " << h;
    }
  };
  check(Full{.causal = true}, "Full causal");
  check(SlidingWindow::streaming(64, 4), "StreamingLLM");
  check(Union{SlidingWindow::causal(64), Global({0, 1, 2, 3})}, "Longformer");
}

// Bad offsets and shapes are rejected by name with nothing written.
TEST(PackedRows, BadOffsetsAreRejectedWithNothingWritten) {
  const index_t head_dim = 32;
  TestCache<float> cache(2, 1, 64, head_dim, head_dim, false);
  cache.fill(64, 85, {64, 30});
  const std::vector<float> q = make_queries<float>(2 * 5 * head_dim, 86);
  std::vector<float> out(q.size(), 7.0f);
  const auto call = [&](const std::vector<index_t>& offsets, index_t batch, index_t rows) {
    attention(Full{.causal = true}, bhld(q.data(), batch, 1, rows, head_dim), offsets, cache.contiguous(),
              bhld(out.data(), batch, 1, rows, head_dim));
  };
  expect_invalid_argument([&] { call({0, 5}, 1, 10); }, "query_offsets.size() = 2");
  expect_invalid_argument([&] { call({1, 5, 10}, 1, 10); }, "query_offsets[0] = 1");
  expect_invalid_argument([&] { call({0, 6, 5}, 1, 5); }, "query_offsets[2] = 5: must be >= query_offsets[1]");
  expect_invalid_argument([&] { call({0, 5, 9}, 1, 10); }, "query_offsets[2] = 9: must equal q.sizes[seq] = 10");
  expect_invalid_argument([&] { call({0, 5, 5}, 2, 5); }, "q.sizes[batch] = 2");
  EXPECT_EQ(out, std::vector<float>(q.size(), 7.0f));
}

}  // namespace
}  // namespace attnkit::testing
