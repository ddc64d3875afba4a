// Attention over KV caches (SPEC.md section 13) against reference::attention over the same
// cache (float64 on the stored values, dequantized for 8-bit blocks): every decodable pattern,
// contiguous and paged caches of every element type, ragged lengths, Lq > 1, empty sequences,
// shared pages, thread and batch invariance, append's rounding and quantization, every bad
// input.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "attnkit/attnkit.hpp"
#include "support/accuracy.hpp"
#include "support/cache_checks.hpp"
#include "support/plan_checks.hpp"
#include "support/test_cache.hpp"
#include "support/test_data.hpp"

namespace attnkit::testing {
namespace {

/// The patterns of SPEC.md section 13 for Hq = 4 heads and caches of up to 704 tokens.
template <class Visit>
void for_each_decode_pattern(Visit&& visit) {
  visit(Full{}, "Full");
  visit(Full{.causal = true}, "Full causal");
  visit(SlidingWindow::causal(100), "causal window 100");
  visit(SlidingWindow::streaming(64, 4), "StreamingLLM: 4 sinks + window 64");
  visit(Union{SlidingWindow::causal(64), Global({0, 1, 2, 3})}, "Longformer: 4 global tokens + causal window 64");
  visit(Dilated(16, 0, {1, 2, 3, 5}), "dilated causal window, dilations 1 2 3 5");
  visit(BlockSparse::local(64, 11, true), "causal block-diagonal, layout for the capacity");
  visit(BigBird(64, 2, 7), "BigBird b = 64, r = 2");
  visit(PerHead<Full, SlidingWindow>({Full{.causal = true}, SlidingWindow::causal(8), SlidingWindow(30, 30), Full{}}),
        "per head");
  visit(Intersection{SlidingWindow::symmetric(200), Full{.causal = true}}, "window and causal");
}

template <class E>
class DecodeTest : public ::testing::Test {};
using CacheTypes = ::testing::Types<float, bfloat16, float16, q8_0_block>;
TYPED_TEST_SUITE(DecodeTest, CacheTypes);

// Every pattern, contiguous and paged (shuffled pages, sequence 1 sharing sequence 0's first
// page), ragged lengths (one empty), Lq = 1 and Lq = 3, GQA (Hq = 4, Hk = 2), float queries.
TYPED_TEST(DecodeTest, EveryPatternMatchesTheReference) {
  using E = TypeParam;
  const index_t batch = 3, kv_heads = 2, q_heads = 4, capacity = 704, head_dim = 64, value_dim = 32;
  for (bool paged : {false, true}) {
    TestCache<E> cache(batch, kv_heads, capacity, head_dim, value_dim, paged, 16, true);
    cache.fill(capacity, 11, {613, 0, 2});
    for (index_t q_len : {1, 3}) {
      const std::vector<float> q = make_queries<float>(batch * q_heads * q_len * head_dim, 5 + q_len);
      for_each_decode_pattern([&](const auto& pattern, const char* name) {
        expect_views_match_reference<float>(pattern, q, q_heads, q_len, cache,
                                            std::string(name) + ", Lq " + std::to_string(q_len));
      });
    }
  }
}

// Half queries with out in their own type and in float; an odd head dim and MHA (Hq = Hk).
TYPED_TEST(DecodeTest, HalfQueriesOddDimsAndMultiHead) {
  using E = TypeParam;
  const index_t batch = 2, kv_heads = 3, q_heads = 3, capacity = 320;
  const index_t head_dim = std::is_same_v<E, q8_0_block> ? 96 : 45, value_dim = std::is_same_v<E, q8_0_block> ? 32 : 19;
  for (bool paged : {false, true}) {
    // Paged: every kv head in one item, each head's single row padded apart from the next's.
    TestCache<E> cache(batch, kv_heads, capacity, head_dim, value_dim, paged);
    cache.fill(capacity, 12, {320, 129});
    const std::vector<bfloat16> qb = make_queries<bfloat16>(batch * q_heads * 2 * head_dim, 9);
    const std::vector<float16> qh = make_queries<float16>(batch * q_heads * 2 * head_dim, 10);
    const auto pattern = Union{SlidingWindow::causal(50), Global({0, 7})};
    const auto check = [&](const auto& view) {
      expect_cache_call_matches_reference<bfloat16>(pattern, qb, q_heads, 2, view, batch, head_dim, value_dim, "bf16");
      expect_cache_call_matches_reference<float>(pattern, qb, q_heads, 2, view, batch, head_dim, value_dim, "bf16->f");
      expect_cache_call_matches_reference<float16>(pattern, qh, q_heads, 2, view, batch, head_dim, value_dim, "fp16");
      expect_cache_call_matches_reference<float>(pattern, qh, q_heads, 2, view, batch, head_dim, value_dim, "fp16->f");
    };
    if (paged) {
      check(cache.paged_view());
    } else {
      check(cache.contiguous());
    }
  }
}

// Empty sequences and rows before a sequence's first token give 0 and lse -inf; slots past a
// sequence's length and keys outside its window hold NaN and never reach an output.
TYPED_TEST(DecodeTest, EmptyRowsAndUnreadSlots) {
  using E = TypeParam;
  const index_t batch = 3, kv_heads = 1, q_heads = 2, capacity = 256, head_dim = 32, q_len = 4;
  TestCache<E> cache(batch, kv_heads, capacity, head_dim, head_dim, false);
  cache.fill(capacity, 13, {0, 2, 200});
  cache.poison_after(1, 2);
  cache.poison_after(2, 200);
  // Sequence 2: keys 100 .. 139 poisoned too; a causal window of 50 at positions 196 .. 199
  // starts at 146.
  for (index_t t = 100; t < 140; ++t) {
    TestCache<E>::poison(cache.contiguous().k.row(2, 0, t), head_dim / kValuesPerElement<E>);
    TestCache<E>::poison(cache.contiguous().v.row(2, 0, t), head_dim / kValuesPerElement<E>);
  }
  const std::vector<float> q = make_queries<float>(batch * q_heads * q_len * head_dim, 14);
  std::vector<float> out(static_cast<std::size_t>(batch * q_heads * q_len * head_dim), 1.0f);
  std::vector<float> lse(static_cast<std::size_t>(batch * q_heads * q_len), 1.0f);
  attention(SlidingWindow::causal(50), bhld(q.data(), batch, q_heads, q_len, head_dim), cache.contiguous(),
            bhld(out.data(), batch, q_heads, q_len, head_dim), lse_view(lse.data(), batch, q_heads, q_len));
  const auto out_view = bhld(out.data(), batch, q_heads, q_len, head_dim);
  const auto lse_at = [&](index_t b, index_t h, index_t i) {
    return lse[static_cast<std::size_t>((b * q_heads + h) * q_len + i)];
  };
  for (index_t h = 0; h < q_heads; ++h)
    for (index_t i = 0; i < q_len; ++i) {
      // Sequence 0 is empty; sequence 1 holds 2 tokens, so its rows 0 and 1 sit before them.
      for (index_t b : {0, 1}) {
        if (b == 1 && i >= 2) continue;
        EXPECT_EQ(lse_at(b, h, i), -std::numeric_limits<float>::infinity()) << b << " " << h << " " << i;
        for (index_t d = 0; d < head_dim; ++d) EXPECT_EQ(out_view(b, h, i, d), 0.0f);
      }
      for (index_t b : {1, 2}) {
        if (b == 1 && i < 2) continue;
        EXPECT_TRUE(std::isfinite(lse_at(b, h, i)));
        for (index_t d = 0; d < head_dim; ++d) EXPECT_TRUE(std::isfinite(out_view(b, h, i, d)));
      }
    }
}

// The same bits for 1 and 2 threads, and for a sequence decoded alone or inside a batch.
TYPED_TEST(DecodeTest, ThreadCountAndBatchCompositionInvariance) {
  using E = TypeParam;
  const index_t batch = 2, kv_heads = 2, q_heads = 8, capacity = 2304, head_dim = 64, q_len = 2;
  TestCache<E> cache(batch, kv_heads, capacity, head_dim, head_dim, false);
  cache.fill(capacity, 15, {2304, 1777});
  const std::vector<float> q = make_queries<float>(batch * q_heads * q_len * head_dim, 16);
  const auto run = [&](const KvCache<E>& view, index_t b0, index_t count, int threads) {
    std::vector<float> out(static_cast<std::size_t>(count * q_heads * q_len * head_dim));
    Options options;
    options.threads = threads;
    attention(Union{Full{.causal = true}, Global({3})},
              bhld(q.data() + b0 * q_heads * q_len * head_dim, count, q_heads, q_len, head_dim), view,
              bhld(out.data(), count, q_heads, q_len, head_dim), options);
    return out;
  };
  // Items of one kv head (contiguous) and of all kv heads (heads interleaved token by token).
  for (const KvCache<E>& full : {cache.contiguous(), cache.heads_interleaved()}) {
    const std::vector<float> one = run(full, 0, batch, 1), two = run(full, 0, batch, 2);
    EXPECT_EQ(one, two);
    // Sequence 1 alone: a one-sequence view of the same storage.
    std::vector<index_t> length{cache.lengths[1]};
    const KvCache<E> alone{TensorView<E>(full.k.row(1, 0, 0), {1, kv_heads, capacity, full.k.dim()}, full.k.strides()),
                           TensorView<E>(full.v.row(1, 0, 0), {1, kv_heads, capacity, full.v.dim()}, full.v.strides()),
                           length};
    const std::vector<float> single = run(alone, 1, 1, 2);
    EXPECT_TRUE(std::equal(single.begin(), single.end(), one.begin() + q_heads * q_len * head_dim));
  }
}

// Append then attend equals prefill attention over the concatenated tensors (the last Lq rows
// of the square call, float cache), within the float tolerance of two float kernels.
TEST(DecodeAppend, AppendThenAttendEqualsPrefill) {
  const index_t heads = 2, head_dim = 32, prompt = 300, steps = 3, total = prompt + steps;
  std::vector<float> q(static_cast<std::size_t>(heads * total * head_dim)), k(q.size()), v(q.size());
  for (std::size_t i = 0; i < q.size(); ++i) {
    q[i] = static_cast<float>(normal_sample(17, 1, i));
    k[i] = static_cast<float>(normal_sample(17, 2, i));
    v[i] = static_cast<float>(normal_sample(17, 3, i));
  }
  const auto all = [&](const std::vector<float>& x) { return bhld(x.data(), 1, heads, total, head_dim); };
  for (const auto& pattern : {SlidingWindow::causal(40), SlidingWindow(SlidingWindow::kUnbounded, 0)}) {
    std::vector<float> prefill(q.size());
    attention(pattern, all(q), all(k), all(v), bhld(prefill.data(), 1, heads, total, head_dim));
    std::vector<float> kc(static_cast<std::size_t>(heads * total * head_dim)), vc(kc.size());
    std::vector<index_t> lengths{0};
    const KvCache<float> cache{bhld(kc.data(), 1, heads, total, head_dim), bhld(vc.data(), 1, heads, total, head_dim),
                               lengths};
    const auto rows = [&](const std::vector<float>& x, index_t first, index_t count) {
      // [1, heads, count, D] rows first .. first + count of a [1, heads, total, D] buffer.
      return TensorView<const float>(x.data() + first * head_dim, {1, heads, count, head_dim},
                                     {heads * total * head_dim, total * head_dim, head_dim, 1});
    };
    append(cache, rows(k, 0, prompt), rows(v, 0, prompt));
    for (index_t step = 0; step < steps; ++step) {
      const index_t t = prompt + step;
      append(cache, rows(k, t, 1), rows(v, t, 1));
      EXPECT_EQ(lengths[0], t + 1);
      std::vector<float> out(static_cast<std::size_t>(heads * head_dim));
      attention(pattern, rows(q, t, 1), cache, bhld(out.data(), 1, heads, 1, head_dim));
      for (index_t h = 0; h < heads; ++h)
        for (index_t d = 0; d < head_dim; ++d) {
          const float expected = all(prefill)(0, h, t, d);
          EXPECT_NEAR(out[static_cast<std::size_t>(h * head_dim + d)], expected, 2e-4 + 2e-4 * std::abs(expected));
        }
    }
  }
}

// StreamingLLM's sinks keep rows causal: over a 3-token prompt with 4 sinks, row 0 sees key 0
// only (its output is v_0 exactly) and row 1 keys 0 and 1, where a Longformer global token
// would let row 0 see keys 1 and 2.
TEST(DecodeSinks, RowsBelowTheSinkCountStayCausal) {
  const index_t head_dim = 32, q_len = 3;
  TestCache<float> cache(1, 1, 16, head_dim, head_dim, false, 16);
  cache.fill(16, 31, {3});
  const std::vector<float> q = make_queries<float>(q_len * head_dim, 32);
  std::vector<float> out(q.size()), lse(q_len);
  attention(SlidingWindow::streaming(8, 4), bhld(q.data(), 1, 1, q_len, head_dim), cache.contiguous(),
            bhld(out.data(), 1, 1, q_len, head_dim), bhld(lse.data(), 1, 1, q_len, 1));
  for (index_t d = 0; d < head_dim; ++d)
    EXPECT_EQ(out[static_cast<std::size_t>(d)], cache.v[static_cast<std::size_t>(d)]);
  std::vector<double> ref(out.size()), ref_lse(lse.size());
  reference::attention(Full{.causal = true}, bhld(q.data(), 1, 1, q_len, head_dim), cache.contiguous(),
                       bhld(ref.data(), 1, 1, q_len, head_dim), bhld(ref_lse.data(), 1, 1, q_len, 1));
  for (std::size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], ref[i], 2e-5 * 5 + 1e-4 * std::abs(ref[i]));
}

// A cache over const buffers (KvCache<const E>, PagedKvCache<const E>) is read by attention and
// by the reference exactly as the writable cache over the same memory.
TEST(DecodeReadOnlyCache, ConstBuffersGiveTheWritableCachesBits) {
  const index_t capacity = 128, head_dim = 32, q_heads = 4, q_len = 3;
  TestCache<float16> cache(2, 2, capacity, head_dim, head_dim, true, 16);
  cache.fill(capacity, 23, {100, 57});
  std::vector<float> q(static_cast<std::size_t>(2 * q_heads * q_len * head_dim));
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = static_cast<float>(normal_sample(23, 9, i));
  const auto qv = bhld(static_cast<const float*>(q.data()), 2, q_heads, q_len, head_dim);
  const std::vector<index_t>& lengths = cache.lengths;
  const auto as_const = [](const TensorView<float16>& view) { return TensorView<const float16>(view); };
  const KvCache<float16> writable = cache.contiguous();
  const KvCache<const float16> read_only{as_const(writable.k), as_const(writable.v), std::span<const index_t>(lengths)};
  const PagedKvCache<float16> paged = cache.paged_view();
  const PagedKvCache<const float16> paged_read_only{as_const(paged.k_pages), as_const(paged.v_pages), paged.block_table,
                                                    std::span<const index_t>(lengths)};
  const auto run = [&](const auto& any_cache) {
    std::vector<float> out(static_cast<std::size_t>(2 * q_heads * q_len * head_dim));
    attention(SlidingWindow::causal(48), qv, any_cache, bhld(out.data(), 2, q_heads, q_len, head_dim));
    return out;
  };
  EXPECT_EQ(run(read_only), run(writable));
  EXPECT_EQ(run(paged_read_only), run(paged));
  const auto run_reference = [&](const auto& any_cache) {
    std::vector<double> out(static_cast<std::size_t>(2 * q_heads * q_len * head_dim)), lse(2 * q_heads * q_len);
    reference::attention(SlidingWindow::causal(48), qv, any_cache, bhld(out.data(), 2, q_heads, q_len, head_dim),
                         lse_view(lse.data(), 2, q_heads, q_len));
    out.insert(out.end(), lse.begin(), lse.end());
    return out;
  };
  EXPECT_EQ(run_reference(read_only), run_reference(writable));
  EXPECT_EQ(run_reference(paged_read_only), run_reference(paged));
}

// append stores rows rounded to nearest even (half caches) or quantized as INFERENCE.md's
// 8-bit block rule says, computed here independently in double.
TEST(DecodeAppend, StoresRoundedAndQuantizedRows) {
  const index_t head_dim = 64;
  std::vector<float> row(static_cast<std::size_t>(head_dim));
  for (index_t d = 0; d < head_dim; ++d)
    row[static_cast<std::size_t>(d)] = static_cast<float>(normal_sample(18, 1, d) * 3);
  row[5] = 1.0f + 0x1p-9f;  // a bfloat16 tie: rounds to even (1.0)
  row[40] = -100.0f;        // the second block's amax
  const auto source = bhld(static_cast<const float*>(row.data()), 1, 1, 1, head_dim);
  std::vector<index_t> lengths{0};
  std::vector<bfloat16> kb(static_cast<std::size_t>(head_dim)), vb(kb.size());
  append(KvCache<bfloat16>{bhld(kb.data(), 1, 1, 1, head_dim), bhld(vb.data(), 1, 1, 1, head_dim), lengths}, source,
         source);
  EXPECT_EQ(lengths[0], 1);
  for (index_t d = 0; d < head_dim; ++d)
    EXPECT_EQ(kb[static_cast<std::size_t>(d)].bits, to_bfloat16(row[static_cast<std::size_t>(d)]).bits);
  EXPECT_EQ(to_float(kb[5]), 1.0f);
  lengths[0] = 0;
  std::vector<q8_0_block> kq(2), vq(2);
  append(KvCache<q8_0_block>{bhld(kq.data(), 1, 1, 1, 2), bhld(vq.data(), 1, 1, 1, 2), lengths}, source, source);
  for (index_t block = 0; block < 2; ++block) {
    double amax = 0;
    for (index_t i = 0; i < 32; ++i)
      amax = std::max(amax, std::abs(static_cast<double>(row[static_cast<std::size_t>(block * 32 + i)])));
    const float d = static_cast<float>(amax) / 127.0f;
    EXPECT_EQ(kq[static_cast<std::size_t>(block)].scale.bits, to_float16(d).bits);
    for (index_t i = 0; i < 32; ++i) {
      const double x = row[static_cast<std::size_t>(block * 32 + i)] * static_cast<double>(1.0f / d);
      const double rounded = x < 0 ? -std::floor(-x + 0.5) : std::floor(x + 0.5);  // half away from zero
      EXPECT_EQ(kq[static_cast<std::size_t>(block)].values[i], static_cast<int>(rounded)) << block << " " << i;
    }
  }
  EXPECT_EQ(kq[1].values[8], -127);
  // A NaN makes its block NaN (scale) with zero values, not a finite block.
  std::vector<float> bad(row);
  bad[3] = std::numeric_limits<float>::quiet_NaN();
  const q8_0_block nan_block = quantize_q8_0(bad.data());
  EXPECT_TRUE(std::isnan(to_float(nan_block.scale)));
  EXPECT_EQ(nan_block.values[0], 0);
  // A finite block too small to invert (max |x| / 127 below 1 / FLT_MAX): zero scale and values,
  // reads back as zeros (x * (1 / d) would be 0 * inf = NaN and +-inf, converted to int8).
  for (const float amax : {1e-38f, 3.6e-37f, std::numeric_limits<float>::denorm_min()}) {
    std::vector<float> tiny(32, 0.0f);
    tiny[5] = amax;
    tiny[9] = -amax / 2;
    const q8_0_block tiny_block = quantize_q8_0(tiny.data());
    EXPECT_EQ(to_float(tiny_block.scale), 0.0f) << amax;
    std::vector<float> back(32, 1.0f);
    dequantize_q8_0(tiny_block, back.data());
    for (index_t i = 0; i < 32; ++i) {
      EXPECT_EQ(tiny_block.values[i], 0) << amax << " " << i;
      EXPECT_EQ(back[static_cast<std::size_t>(i)], 0.0f) << amax << " " << i;
    }
  }
}

// Every bad input: attnkit::invalid_argument naming the argument, nothing written (out keeps
// its sentinel; append leaves the cache and the lengths as they were).
TEST(DecodeErrors, BadInputsAreRejectedWithNothingWritten) {
  const index_t capacity = 64, head_dim = 32;
  TestCache<float> cache(2, 2, capacity, head_dim, head_dim, true, 16);
  cache.fill(capacity, 19, {40, 64});
  std::vector<float> q(static_cast<std::size_t>(2 * 4 * 1 * head_dim), 0.5f), out(q.size(), 7.0f);
  const auto qv = bhld(static_cast<const float*>(q.data()), 2, 4, 1, head_dim);
  const auto ov = bhld(out.data(), 2, 4, 1, head_dim);
  const auto expect_rejected = [&](auto&& call, const std::string& needle) {
    try {
      call();
      ADD_FAILURE() << "no exception, expected one naming " << needle;
    } catch (const attnkit::invalid_argument& error) {
      EXPECT_NE(std::string(error.what()).find(needle), std::string::npos) << error.what();
    }
    EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](float x) { return x == 7.0f; })) << needle;
  };
  const std::int32_t mapped = cache.table[1];
  cache.table[1] = 99;  // sequence 0's second page
  expect_rejected([&] { attention(Full{}, qv, cache.paged_view(), ov); }, "cache.block_table(0, 1)");
  cache.table[1] = mapped;
  expect_rejected(
      [&] {
        std::vector<index_t> lengths{40, 65};
        auto bad = cache.paged_view();
        bad.lengths = lengths;
        attention(Full{}, qv, bad, ov);
      },
      "cache.lengths[1]");
  expect_rejected(
      [&] {
        std::vector<float> q3(static_cast<std::size_t>(2 * 3 * head_dim));
        attention(Full{}, bhld(static_cast<const float*>(q3.data()), 2, 3, 1, head_dim), cache.paged_view(),
                  bhld(out.data(), 2, 3, 1, head_dim));
      },
      "q.sizes[heads]");
  expect_rejected(
      [&] {
        attention(Full{}, bhld(static_cast<const float*>(q.data()), 2, 4, 1, head_dim / 2), cache.paged_view(),
                  bhld(out.data(), 2, 4, 1, head_dim));
      },
      "q.sizes[dim]");
  expect_rejected(
      [&] {
        Options options;
        options.key_lengths = {3, 3};
        attention(Full{}, qv, cache.paged_view(), ov, options);
      },
      "options.key_lengths");
  expect_rejected(
      [&] {  // a Schedule layer holding a kind that cannot decode
        const AnyKind layer = Linformer::gaussian(16, 64, 1, 0);
        attention(layer, qv, cache.paged_view(), ov);
      },
      "cannot attend over a KV cache");
  expect_rejected(
      [&] {  // a global token beyond 40 is dropped, but BlockSparse with too few blocks is not
        attention(BlockSparse::local(16, 2), qv, cache.paged_view(), ov);
      },
      "BlockSparse");

  // append: a full sequence (64 of 64), then an unmapped page; nothing written, lengths kept.
  const std::vector<float> before_k = cache.k;
  std::vector<float> row(static_cast<std::size_t>(2 * 2 * head_dim), 1.0f);
  const auto rv = bhld(static_cast<const float*>(row.data()), 2, 2, 1, head_dim);
  expect_rejected([&] { append(cache.paged_view(), rv, rv); }, "the cache is full");
  cache.lengths = {48, 10};
  cache.table[3] = -1;  // sequence 0's fourth page (tokens 48 .. 63)
  expect_rejected([&] { append(cache.paged_view(), rv, rv); }, "cache.block_table(0, 3)");
  cache.table[3] = cache.table[2] + 1 < 11 ? cache.table[2] + 1 : 0;
  expect_rejected(
      [&] {
        std::vector<float> wide(static_cast<std::size_t>(2 * 2 * 2 * head_dim));
        append(cache.paged_view(), rv, bhld(static_cast<const float*>(wide.data()), 2, 2, 2, head_dim));
      },
      "v_new.sizes[seq]");
  // Ragged: a count per sequence, each checked against its own room and pages.
  std::vector<float> two(static_cast<std::size_t>(2 * 2 * 2 * head_dim), 1.0f);
  const auto tv = bhld(static_cast<const float*>(two.data()), 2, 2, 2, head_dim);
  expect_rejected([&] { append(cache.paged_view(), tv, tv, std::vector<index_t>{1}); }, "counts.size() = 1");
  expect_rejected([&] { append(cache.paged_view(), tv, tv, std::vector<index_t>{1, 3}); }, "counts[1] = 3");
  expect_rejected([&] { append(cache.paged_view(), tv, tv, std::vector<index_t>{0, -1}); }, "counts[1] = -1");
  cache.lengths = {63, 10};
  expect_rejected([&] { append(cache.paged_view(), tv, tv, std::vector<index_t>{2, 0}); }, "cache.lengths[0] = 63");
  EXPECT_EQ(cache.k, before_k);
  EXPECT_EQ(cache.lengths, (std::vector<index_t>{63, 10}));
}

// Continuous batching: one call appends a different number of rows to each sequence (a
// 5-row prompt chunk, one token, nothing), rows past a sequence's count unread; the cache then
// holds what per-sequence appends of those rows write (compared bit for bit), paged and
// contiguous.
TEST(DecodeAppend, RaggedCountsWriteEachSequencesOwnRows) {
  const index_t head_dim = 32, rows = 5;
  const std::vector<index_t> counts{5, 1, 0};
  std::vector<float> k_new(static_cast<std::size_t>(3 * 2 * rows * head_dim)), v_new(k_new.size());
  for (std::size_t i = 0; i < k_new.size(); ++i) {
    k_new[i] = static_cast<float>(normal_sample(40, 1, i));
    v_new[i] = static_cast<float>(normal_sample(40, 2, i));
  }
  // Rows past a count hold NaN: they must not be read.
  for (index_t b = 0; b < 3; ++b)
    for (index_t h = 0; h < 2; ++h)
      for (index_t t = counts[static_cast<std::size_t>(b)]; t < rows; ++t)
        for (index_t d = 0; d < head_dim; ++d)
          k_new[static_cast<std::size_t>(((b * 2 + h) * rows + t) * head_dim + d)] = std::nanf("");
  const auto all = [&](const std::vector<float>& x) { return bhld(x.data(), 3, 2, rows, head_dim); };
  for (bool paged : {false, true}) {
    TestCache<float16> ragged(3, 2, 64, head_dim, head_dim, paged, 16), separate = ragged;
    ragged.fill(64, 41, {20, 30, 7});
    separate.fill(64, 41, {20, 30, 7});
    const auto view = [&](TestCache<float16>& c) {
      return paged ? std::variant<KvCache<float16>, PagedKvCache<float16>>(c.paged_view())
                   : std::variant<KvCache<float16>, PagedKvCache<float16>>(c.contiguous());
    };
    std::visit([&](const auto& c) { append(c, all(k_new), all(v_new), counts); }, view(ragged));
    EXPECT_EQ(ragged.lengths, (std::vector<index_t>{25, 31, 7}));
    // The same rows one sequence at a time: a one-sequence cache over sequence b's storage.
    for (index_t b = 0; b < 3; ++b) {
      std::vector<index_t> only(3, 0);
      only[static_cast<std::size_t>(b)] = counts[static_cast<std::size_t>(b)];
      std::visit([&](const auto& c) { append(c, all(k_new), all(v_new), only); }, view(separate));
    }
    EXPECT_EQ(separate.lengths, ragged.lengths);
    ASSERT_EQ(ragged.k.size(), separate.k.size());
    for (std::size_t i = 0; i < ragged.k.size(); ++i) {
      ASSERT_EQ(ragged.k[i].bits, separate.k[i].bits) << i;
      ASSERT_EQ(ragged.v[i].bits, separate.v[i].bits) << i;
    }
    // Sequence 0's new rows are the rounded float rows, at tokens 20 .. 24.
    const auto keys = view(ragged);
    const float16* row =
        std::visit([&](const auto& c) { return attnkit::detail::cache_rows<const float16>(c).key(0, 1, 22); }, keys);
    for (index_t d = 0; d < head_dim; ++d)
      EXPECT_EQ(row[d].bits, to_float16(k_new[static_cast<std::size_t>(((0 * 2 + 1) * rows + 2) * head_dim + d)]).bits);
  }
}

// Ready 8-bit blocks (quantized elsewhere, e.g. by llama.cpp) are copied into an 8-bit cache as
// they are, and read back as the blocks quantized from the same floats.
TEST(DecodeAppend, ReadyEightBitBlocksAreCopied) {
  const index_t head_dim = 64, blocks = head_dim / 32;
  std::vector<float> row(static_cast<std::size_t>(2 * head_dim));
  for (std::size_t i = 0; i < row.size(); ++i) row[i] = static_cast<float>(normal_sample(42, 1, i));
  std::vector<q8_0_block> ready(static_cast<std::size_t>(2 * blocks));
  for (index_t b = 0; b < 2 * blocks; ++b) ready[static_cast<std::size_t>(b)] = quantize_q8_0(row.data() + b * 32);
  std::vector<index_t> lengths_a{3}, lengths_b{3};
  std::vector<q8_0_block> ka(static_cast<std::size_t>(8 * blocks)), va(ka.size()), kb = ka, vb = ka;
  const KvCache<q8_0_block> copied{bhld(ka.data(), 1, 1, 8, blocks), bhld(va.data(), 1, 1, 8, blocks), lengths_a};
  const KvCache<q8_0_block> quantized{bhld(kb.data(), 1, 1, 8, blocks), bhld(vb.data(), 1, 1, 8, blocks), lengths_b};
  append(copied, bhld(static_cast<const q8_0_block*>(ready.data()), 1, 1, 2, blocks),
         bhld(static_cast<const q8_0_block*>(ready.data()), 1, 1, 2, blocks));
  append(quantized, bhld(static_cast<const float*>(row.data()), 1, 1, 2, head_dim),
         bhld(static_cast<const float*>(row.data()), 1, 1, 2, head_dim));
  EXPECT_EQ(lengths_a, lengths_b);
  EXPECT_EQ(lengths_a[0], 5);
  EXPECT_EQ(std::memcmp(ka.data(), kb.data(), ka.size() * sizeof(q8_0_block)), 0);
  EXPECT_EQ(std::memcmp(va.data(), vb.data(), va.size() * sizeof(q8_0_block)), 0);
  expect_invalid_argument(
      [&] {
        append(copied, bhld(static_cast<const q8_0_block*>(ready.data()), 1, 1, 1, blocks * 2),
               bhld(static_cast<const q8_0_block*>(ready.data()), 1, 1, 1, blocks * 2));
      },
      "k_new.sizes[dim] = 4: must equal the cache's head dimension");
}

}  // namespace
}  // namespace attnkit::testing
