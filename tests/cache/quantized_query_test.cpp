// The 8-bit query mode over q8_0_block caches (SPEC.md section 13, Options::quantized_query):
// scores of literal blocks, the vector kernel against the key-by-key one, every layout and a
// set of patterns against reference::attention with the mode on, thread invariance, and the
// rejected uses.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "attnkit/attnkit.hpp"
#include "attnkit/kernel/decode_driver.hpp"
#include "attnkit/simd/q8_key_dots.hpp"
#include "support/accuracy.hpp"
#include "support/cache_checks.hpp"
#include "support/plan_checks.hpp"
#include "support/test_cache.hpp"
#include "support/test_data.hpp"

namespace attnkit::testing {
namespace {

/// Query rows given as floats, quantized by the driver's kernel::quantize_query_row (score
/// factor 1).
struct QuantizedRows {
  std::vector<q8_0_block> blocks;
  std::vector<float> scales;
  std::vector<std::int32_t> offsets;
  index_t blocks_per_row;

  QuantizedRows(const std::vector<float>& rows, index_t head_dim)
      : blocks(rows.size() / q8_0_block::kValues),
        scales(blocks.size()),
        offsets(blocks.size()),
        blocks_per_row(head_dim / q8_0_block::kValues) {
    std::vector<float> widened(static_cast<std::size_t>(head_dim));
    for (std::size_t r = 0; r * static_cast<std::size_t>(head_dim) < rows.size(); ++r) {
      const std::size_t at = r * static_cast<std::size_t>(blocks_per_row);
      kernel::quantize_query_row(rows.data() + r * static_cast<std::size_t>(head_dim), head_dim, 1.0f, widened.data(),
                                 blocks.data() + at, scales.data() + at, offsets.data() + at);
    }
  }
  simd::Q8Queries view() const { return {blocks.data(), scales.data(), offsets.data(), blocks_per_row}; }
};

/// count N(0, 1) samples times `scale`.
std::vector<float> scaled_normal_values(index_t count, std::uint64_t seed, double scale) {
  std::vector<float> values(static_cast<std::size_t>(count));
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(scale * normal_sample(seed, 7, i));
  return values;
}

/// A block of the given scale, zeros but for values[i] = value.
q8_0_block literal_block(float scale, std::initializer_list<std::pair<index_t, int>> values) {
  q8_0_block block{};
  block.scale = to_float16(scale);
  for (const auto& [i, value] : values) block.values[i] = static_cast<std::int8_t>(value);
  return block;
}

// Scores from hand-made blocks: sum over blocks of d_q d_k sum_i q_i k_i, including a key value
// of -128 (a ready block may hold it; the cache's own rule gives -127 .. 127).
TEST(QuantizedQueryScores, LiteralBlocks) {
  // One row of two blocks: block 0 q_0 = 127 (scale 0.5), block 1 q_3 = -2, q_31 = 1 (scale 4).
  const std::vector<q8_0_block> row{literal_block(0.5f, {{0, 127}}), literal_block(4.0f, {{3, -2}, {31, 1}})};
  const std::vector<float> scales{0.5f, 4.0f};
  const std::vector<std::int32_t> offsets{-128 * 127, -128 * -1};
  const simd::Q8Queries queries{row.data(), scales.data(), offsets.data(), 2};
  // Key 0: block 0 k_0 = -128 (scale 0.25), block 1 k_3 = 5, k_31 = -128 (scale 2).
  // Key 1: block 0 zero, block 1 k_3 = 127 (scale 0.125).
  const std::vector<q8_0_block> keys{literal_block(0.25f, {{0, -128}}), literal_block(2.0f, {{3, 5}, {31, -128}}),
                                     literal_block(1.0f, {}), literal_block(0.125f, {{3, 127}})};
  float scores[2] = {};
  simd::q8_key_dots(queries, 1, keys.data(), 2, 2, 64, scores, 2);
  // Key 0: 0.5 * 0.25 * (127 * -128) + 4 * 2 * (-2 * 5 + 1 * -128) = -2032 - 1104.
  EXPECT_EQ(scores[0], -3136.0f);
  // Key 1: 0 + 4 * 0.125 * (-2 * 127) = -127.
  EXPECT_EQ(scores[1], -127.0f);
}

// The AVX512-VNNI kernel (16 keys at a time, tails masked) gives the key-by-key kernel's bits,
// for 1 .. 9 rows, counts across tile tails and a stride wider than the row.
TEST(QuantizedQueryScores, VectorKernelEqualsKeyByKey) {
  const index_t head_dim = 128, blocks = head_dim / q8_0_block::kValues, stride = blocks + 3;
  for (index_t rows : {1, 4, 9}) {
    const QuantizedRows queries(scaled_normal_values(rows * head_dim, 21 + rows, 3.0), head_dim);
    for (index_t count : {1, 15, 16, 17, 40}) {
      std::vector<q8_0_block> keys;
      const std::vector<float> values = scaled_normal_values(count * stride * q8_0_block::kValues, 31 + count, 2.0);
      for (index_t c = 0; c < count * stride; ++c)
        keys.push_back(quantize_q8_0(values.data() + c * q8_0_block::kValues));
      std::vector<float> fast(static_cast<std::size_t>(rows * count)), slow(fast.size());
      simd::q8_key_dots(queries.view(), rows, keys.data(), stride, count, head_dim, fast.data(), count);
      simd::detail::q8_key_dots_portable(queries.view(), rows, keys.data(), stride, count, blocks, slow.data(), count);
      EXPECT_EQ(fast, slow) << rows << " rows, " << count << " keys";
    }
  }
}

/// attention over the cache with the mode on against reference::attention with it on; the
/// reference with it off differs (the mode is in effect).
template <class Out, class Q, class Cache, class P>
void expect_mode_matches_reference(const P& pattern, const std::vector<Q>& q, index_t q_heads, index_t q_len,
                                   const Cache& cache, index_t batch, index_t head_dim, index_t value_dim,
                                   const std::string& label, int threads = 0) {
  Options options;
  options.quantized_query = true;
  options.threads = threads;
  expect_cache_call_matches_reference<Out>(pattern, q, q_heads, q_len, cache, batch, head_dim, value_dim, label,
                                           options);
  const auto qv = bhld(q.data(), batch, q_heads, q_len, head_dim);
  std::vector<double> quantized(static_cast<std::size_t>(batch * q_heads * q_len * value_dim)), exact(quantized.size());
  reference::attention(pattern, qv, cache, bhld(quantized.data(), batch, q_heads, q_len, value_dim), options);
  reference::attention(pattern, qv, cache, bhld(exact.data(), batch, q_heads, q_len, value_dim));
  EXPECT_NE(quantized, exact) << label << ": the quantized query changes the result";
}

// Patterns over contiguous, heads-interleaved and paged caches (sequence 1 sharing sequence 0's
// first page), ragged lengths with an empty sequence, Lq 1 and 3, GQA, float and bfloat16
// queries; one query row holds a zero block and a block below the invertible range (both
// quantize to zeros).
TEST(QuantizedQuery, PatternsAndLayoutsMatchTheReference) {
  const index_t batch = 3, kv_heads = 2, q_heads = 4, capacity = 704, head_dim = 64, value_dim = 32;
  for (bool paged : {false, true}) {
    TestCache<q8_0_block> cache(batch, kv_heads, capacity, head_dim, value_dim, paged, 16, true);
    cache.fill(capacity, 41, {613, 0, 2});
    for (index_t q_len : {1, 3}) {
      std::vector<float> q = make_queries<float>(batch * q_heads * q_len * head_dim, 43 + q_len);
      std::fill(q.begin(), q.begin() + 32, 0.0f);
      std::fill(q.begin() + 32, q.begin() + 64, 1e-38f);
      const std::vector<bfloat16> qb = make_queries<bfloat16>(q.size(), 47 + q_len);
      const auto check = [&](const auto& pattern, const std::string& name) {
        const std::string label = name + (paged ? ", paged" : ", contiguous") + ", Lq " + std::to_string(q_len);
        if (paged) {
          expect_mode_matches_reference<float>(pattern, q, q_heads, q_len, cache.paged_view(), batch, head_dim,
                                               value_dim, label);
          expect_mode_matches_reference<float>(pattern, qb, q_heads, q_len, cache.paged_view(), batch, head_dim,
                                               value_dim, label + ", bf16 queries");
        } else {
          expect_mode_matches_reference<float>(pattern, q, q_heads, q_len, cache.contiguous(), batch, head_dim,
                                               value_dim, label);
          expect_mode_matches_reference<float>(pattern, q, q_heads, q_len, cache.heads_interleaved(), batch, head_dim,
                                               value_dim, label + ", heads interleaved");
        }
      };
      check(Full{.causal = true}, "Full causal");
      check(SlidingWindow::streaming(64, 4), "StreamingLLM");
      check(Union{SlidingWindow::causal(64), Global({0, 1, 2, 3})}, "Longformer");
      check(BigBird(64, 2, 7), "BigBird");
    }
  }
}

// The same bits for 1 and 2 threads over chunks of a long sequence, with ALiBi and softcap on.
TEST(QuantizedQuery, ThreadCountInvarianceWithModifiers) {
  const index_t batch = 1, kv_heads = 2, q_heads = 8, capacity = 4608, head_dim = 128;
  TestCache<q8_0_block> cache(batch, kv_heads, capacity, head_dim, head_dim, false);
  cache.fill(capacity, 51, {4500});
  const std::vector<float> q = make_queries<float>(q_heads * head_dim, 52);
  const auto run = [&](int threads) {
    std::vector<float> out(q.size());
    Options options;
    options.quantized_query = true;
    options.threads = threads;
    options.softcap = 20;
    options.alibi_slopes = alibi_slopes(q_heads);
    attention(Full{.causal = true}, bhld(q.data(), 1, q_heads, 1, head_dim), cache.contiguous(),
              bhld(out.data(), 1, q_heads, 1, head_dim), options);
    return out;
  };
  EXPECT_EQ(run(1), run(2));
  expect_mode_matches_reference<float>(SlidingWindow::causal(3000), q, q_heads, 1, cache.contiguous(), batch, head_dim,
                                       head_dim, "window over chunks", 2);
}

// The mode over a cache of another type, and in calls on tensors, is an invalid_argument naming
// options.quantized_query, with nothing written.
TEST(QuantizedQuery, RejectedOutsideEightBitCaches) {
  const index_t head_dim = 32;
  TestCache<float16> cache(1, 1, 64, head_dim, head_dim, false);
  cache.fill(64, 61, {64});
  const std::vector<float> q = make_queries<float>(head_dim, 62);
  std::vector<float> out(q.size(), 7.0f);
  std::vector<double> out64(q.size(), 7.0);
  Options options;
  options.quantized_query = true;
  const auto qv = bhld(q.data(), 1, 1, 1, head_dim);
  expect_invalid_argument(
      [&] { attention(Full{}, qv, cache.contiguous(), bhld(out.data(), 1, 1, 1, head_dim), options); },
      "options.quantized_query");
  expect_invalid_argument(
      [&] { reference::attention(Full{}, qv, cache.contiguous(), bhld(out64.data(), 1, 1, 1, head_dim), options); },
      "options.quantized_query");
  expect_invalid_argument([&] { attention(Full{}, qv, qv, qv, bhld(out.data(), 1, 1, 1, head_dim), options); },
                          "options.quantized_query");
  EXPECT_EQ(out, std::vector<float>(q.size(), 7.0f));
  EXPECT_EQ(out64, std::vector<double>(q.size(), 7.0));
}

}  // namespace
}  // namespace attnkit::testing
