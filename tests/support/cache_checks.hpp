#pragma once
// Attention over a KV cache checked against reference::attention over the same cache (SPEC.md
// section 13): out and lse within the decode tolerance.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "attnkit/core/options.hpp"
#include "attnkit/decode.hpp"
#include "attnkit/reference/decode.hpp"
#include "support/accuracy.hpp"
#include "support/test_cache.hpp"

namespace attnkit::testing {

/// Runs attnkit::attention over the cache with `options` and compares out (Out) and lse with
/// reference::attention over the same cache and options: q [B, Hq, Lq, D] of Q.
template <class Out, class Q, class Cache, class P>
void expect_cache_call_matches_reference(const P& pattern, const std::vector<Q>& q, index_t q_heads, index_t q_len,
                                         const Cache& cache, index_t batch, index_t head_dim, index_t value_dim,
                                         const std::string& label, const Options& options = {}) {
  const auto qv = bhld(q.data(), batch, q_heads, q_len, head_dim);
  std::vector<Out> out(static_cast<std::size_t>(batch * q_heads * q_len * value_dim), store_as<Out>(kNaN));
  std::vector<float> lse(static_cast<std::size_t>(batch * q_heads * q_len), 0.0f);
  attention(pattern, qv, cache, bhld(out.data(), batch, q_heads, q_len, value_dim),
            lse_view(lse.data(), batch, q_heads, q_len), options);
  std::vector<double> ref(out.size()), ref_lse(lse.size());
  reference::attention(pattern, qv, cache, bhld(ref.data(), batch, q_heads, q_len, value_dim),
                       lse_view(ref_lse.data(), batch, q_heads, q_len), options);
  std::vector<double> got(out.size()), got_lse(lse.begin(), lse.end());
  for (std::size_t i = 0; i < out.size(); ++i) got[i] = static_cast<double>(widen(out[i]));
  const auto view = [&](const std::vector<double>& x, index_t dim) {
    return bhld(x.data(), batch, q_heads, q_len, dim);
  };
  EXPECT_TRUE(all_close<double>(view(got, value_dim), view(ref, value_dim), decode_tolerance<Out>())) << label;
  EXPECT_TRUE(all_close<double>(view(got_lse, 1), view(ref_lse, 1), Tolerance{2e-5, 1e-6})) << label << " (lse)";
}

/// expect_cache_call_matches_reference over each view of a test cache: its pages, or its
/// contiguous storage seen [B, Hk, capacity, D] and with the heads interleaved token by token
/// (work items of all kv heads, read page by page).
template <class Out, class Q, class E, class P>
void expect_views_match_reference(const P& pattern, const std::vector<Q>& q, index_t q_heads, index_t q_len,
                                  TestCache<E>& cache, const std::string& label, const Options& options = {}) {
  const auto check = [&](const auto& view, const std::string& name) {
    expect_cache_call_matches_reference<Out>(pattern, q, q_heads, q_len, view, cache.batch, cache.head_dim,
                                             cache.value_dim, label + ", " + name, options);
  };
  if (cache.paged) {
    check(cache.paged_view(), "paged");
  } else {
    check(cache.contiguous(), "contiguous");
    check(cache.heads_interleaved(), "heads interleaved");
  }
}

}  // namespace attnkit::testing
