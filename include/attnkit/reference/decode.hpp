#pragma once
// reference::attention over a KV cache: SPEC.md section 13's definition evaluated in double,
// for tests and users checking a decode result. Independent of the decode kernels: it finds
// each token's slot from the cache's definition (page of the block table, slot in the page),
// dequantizes element by element and takes mu from the mask's multiplicity, key by key.

#include <cmath>
#include <functional>
#include <limits>
#include <span>
#include <type_traits>
#include <vector>

#include "attnkit/cache/kv_cache.hpp"
#include "attnkit/cache/sequence_pattern.hpp"
#include "attnkit/core/concepts.hpp"
#include "attnkit/core/half.hpp"
#include "attnkit/core/options.hpp"
#include "attnkit/core/q8_block.hpp"
#include "attnkit/core/score_modifiers.hpp"
#include "attnkit/core/tensor_view.hpp"
#include "attnkit/core/validate.hpp"
#include "attnkit/decode.hpp"

namespace attnkit::reference {

namespace detail {

/// Value d of a cache row as double: exact for every element type.
template <class E>
double cache_value(const E* row, index_t d) {
  if constexpr (std::is_same_v<E, q8_0_block>) {
    const q8_0_block& block = row[d / q8_0_block::kValues];
    return static_cast<double>(to_float(block.scale)) * static_cast<double>(block.values[d % q8_0_block::kValues]);
  } else {
    return static_cast<double>(widen(row[d]));
  }
}

/// The K (or V) row of token t of sequence b, kv head h.
template <class E>
const E* token_row(const KvCache<E>& cache, bool value, index_t b, index_t h, index_t t) {
  return (value ? cache.v : cache.k).row(b, h, t);
}
template <class E>
const E* token_row(const PagedKvCache<E>& cache, bool value, index_t b, index_t h, index_t t) {
  const TensorView<E>& pages = value ? cache.v_pages : cache.k_pages;
  const index_t page_size = pages.seq();
  return pages.row(cache.block_table(b, t / page_size), h, t % page_size);
}

/// mu(head, position, key) of one sequence's mask.
using SequenceMask = std::function<int(index_t, index_t, index_t)>;
/// The mask of a sequence of `length` tokens.
using SequenceMasks = std::function<SequenceMask(index_t length)>;

/// Where the rows of each sequence lie in q, out and lse: [B, Hq, Lq, .], or packed
/// [1, Hq, total, .] with sequence b's rows from offsets[b] on (B + 1 offsets).
struct QueryLayout {
  std::span<const index_t> offsets;
  bool packed;
  index_t rows(index_t b) const {
    return offsets[static_cast<std::size_t>(b) + 1] - offsets[static_cast<std::size_t>(b)];
  }
  index_t batch(index_t b) const { return packed ? 0 : b; }
  index_t row(index_t b, index_t i) const { return packed ? offsets[static_cast<std::size_t>(b)] + i : i; }
};

/// The rows of every sequence against its cache in double, for validated arguments and q
/// already widened. The pattern arrives as `masks_of`, so this loop is compiled once per cache
/// type, not once per pattern, query type and cache type.
template <AnyKvCache Cache>
void decode_rows(const SequenceMasks& masks_of, const TensorView<const double>& q, const Cache& cache,
                 const attnkit::detail::CacheShape& shape, const TensorView<double>& out, const TensorView<double>* lse,
                 double sigma, const ScoreModifiers& modifiers, const QueryLayout& layout) {
  using E = cache_element_t<Cache>;
  const index_t group = q.heads() / shape.kv_heads;
  for (index_t b = 0; b < shape.batch; ++b) {
    const index_t length = cache.lengths[static_cast<std::size_t>(b)], rows = layout.rows(b), vb = layout.batch(b);
    const SequenceMask mu_of = masks_of(length);
    for (index_t h = 0; h < q.heads(); ++h)
      for (index_t i = 0; i < rows; ++i) {
        const index_t position = length - rows + i, vi = layout.row(b, i);
        std::vector<double> logits, weights;
        std::vector<index_t> keys;
        if (position >= 0) {
          for (index_t j = 0; j < length; ++j) {
            const int mu = mu_of(h, position, j);
            if (mu == 0) continue;
            const E* key = token_row(cache, false, b, h / group, j);
            double dot = 0;
            for (index_t d = 0; d < shape.head_dim; ++d) dot += q(vb, h, vi, d) * cache_value(key, d);
            const double logit = modifiers.apply(sigma * dot, h, position, j);  // SPEC.md section 14
            for (int m = 0; m < mu; ++m) {
              logits.push_back(logit);
              keys.push_back(j);
            }
          }
        }
        double top = -std::numeric_limits<double>::infinity(), total = 0;
        for (double s : logits) top = std::max(top, s);
        for (double s : logits) {
          weights.push_back(std::exp(s - top));
          total += weights.back();
        }
        std::vector<double> sum(static_cast<std::size_t>(shape.value_dim), 0.0);
        for (std::size_t e = 0; e < keys.size(); ++e) {
          const E* value = token_row(cache, true, b, h / group, keys[e]);
          for (index_t d = 0; d < shape.value_dim; ++d)
            sum[static_cast<std::size_t>(d)] += weights[e] * cache_value(value, d);
        }
        for (index_t d = 0; d < shape.value_dim; ++d)
          out(vb, h, vi, d) = keys.empty() ? 0.0 : sum[static_cast<std::size_t>(d)] / total;
        if (lse != nullptr)
          (*lse)(vb, h, vi, 0) = keys.empty() ? -std::numeric_limits<double>::infinity() : top + std::log(total);
      }
  }
}

/// q [B, Hq, Lq, D] widened exactly into doubles of the same shape (BHLD). With the 8-bit query
/// mode each block of 32 values is quantized by the cache's rule and read back as d * q (exact
/// in double), so a score is the sum over blocks of d_q d_k sum_i q_i k_i (SPEC.md section 13).
/// Typed by Q alone: compiled once per query type, not per pattern and cache type.
template <class Q>
std::vector<double> widened_query(const TensorView<const Q>& q, bool quantized_query) {
  std::vector<double> wide(static_cast<std::size_t>(q.batch() * q.heads() * q.seq() * q.dim()));
  const TensorView<double> q64 = bhld(wide.data(), q.batch(), q.heads(), q.seq(), q.dim());
  for (index_t b = 0; b < q.batch(); ++b)
    for (index_t h = 0; h < q.heads(); ++h)
      for (index_t i = 0; i < q.seq(); ++i)
        for (index_t d = 0; d < q.dim(); ++d) q64(b, h, i, d) = static_cast<double>(widen(q(b, h, i, d)));
  if (!quantized_query) return wide;
  // Each double is a widened float, bfloat16 or float16, so narrowing it back to float is exact.
  for (std::size_t c = 0; c < wide.size(); c += q8_0_block::kValues) {
    float block[q8_0_block::kValues];
    for (index_t d = 0; d < q8_0_block::kValues; ++d) block[d] = static_cast<float>(wide[c + d]);
    const q8_0_block quantized = quantize_q8_0(block);
    for (index_t d = 0; d < q8_0_block::kValues; ++d)
      wide[c + d] = static_cast<double>(to_float(quantized.scale)) * static_cast<double>(quantized.values[d]);
  }
  return wide;
}

/// The masks of sequence_prefix(pattern, length) on the square shape of a sequence of
/// `length` tokens. Typed by P alone.
template <DecodablePattern P>
SequenceMasks sequence_masks(const P& pattern, index_t query_heads, const attnkit::detail::CacheShape& shape) {
  return [&pattern, query_heads, shape](index_t length) -> SequenceMask {
    const AttentionShape square{1, query_heads, shape.kv_heads, length, length, shape.head_dim, shape.value_dim};
    return [mask = sequence_prefix(pattern, length).mask(square)](index_t h, index_t i, index_t j) {
      return static_cast<int>(mask.multiplicity(h, i, j));
    };
  };
}

/// The float64 evaluation behind the reference::attention overloads over a cache: validates,
/// widens q, then decode_rows. Only this glue is compiled per pattern, query type and cache type;
/// the steps it calls are typed by one of them each.
template <DecodablePattern P, class Q, AnyKvCache Cache>
void decode_in_double(const P& pattern, const TensorView<const Q>& q, const Cache& cache, const TensorView<double>& out,
                      const TensorView<double>* lse, const Options& options, std::span<const index_t> query_offsets,
                      bool packed) {
  const attnkit::detail::CacheShape shape = attnkit::detail::validate_cache(cache);
  attnkit::detail::validate_decode(q, shape, std::is_same_v<cache_element_t<Cache>, q8_0_block>, out, lse, options,
                                   query_offsets, packed);
  std::vector<index_t> offsets(query_offsets.begin(), query_offsets.end());
  if (!packed)
    for (index_t b = 0; b <= shape.batch; ++b) offsets.push_back(b * q.seq());
  std::vector<double> wide = widened_query(q, options.quantized_query);
  const TensorView<const double> q64 =
      bhld(static_cast<const double*>(wide.data()), q.batch(), q.heads(), q.seq(), q.dim());
  decode_rows(sequence_masks(pattern, q.heads(), shape), q64, cache, shape, out, lse,
              attnkit::detail::resolve_scale(options, shape.head_dim),
              attnkit::detail::validate_score_modifiers(options.softcap, options.alibi_slopes, q.heads()),
              QueryLayout{offsets, packed});
}

}  // namespace detail

/// Float64 attention of q [B, Hq, Lq, D] (float, bfloat16 or float16, widened exactly) over the
/// cache's tokens, with the arguments and rules of attnkit::attention over a cache (views of
/// any constness, lse as a view): row i of sequence b at position p = lengths[b] - Lq + i
/// attends key j < lengths[b] mu times, mu the multiplicity of
/// sequence_prefix(pattern, lengths[b])'s mask on the lengths[b] x lengths[b] shape; values of
/// 8-bit blocks are d * q; with options.quantized_query each query row is quantized to 8-bit
/// blocks first (quantize_q8_0 on its float values) and read back the same way. out [B, Hq, Lq, Dv] in double; empty
/// rows give 0 (and lse -inf). O(Lq lengths[b] (D + Dv)) per head.
template <DecodablePattern P, class Q, AnyKvCache Cache>
void attention(const P& pattern, TensorView<Q> q, const Cache& cache, TensorView<double> out,
               const Options& options = {}) {
  detail::decode_in_double(pattern, TensorView<const std::remove_const_t<Q>>(q), attnkit::detail::readable_cache(cache),
                           out, nullptr, options, {}, false);
}

/// As above, and lse [B, Hq, Lq, 1] in double (the natural-log log-sum-exp of each row).
template <DecodablePattern P, class Q, AnyKvCache Cache>
void attention(const P& pattern, TensorView<Q> q, const Cache& cache, TensorView<double> out, TensorView<double> lse,
               const Options& options = {}) {
  detail::decode_in_double(pattern, TensorView<const std::remove_const_t<Q>>(q), attnkit::detail::readable_cache(cache),
                           out, &lse, options, {}, false);
}

/// Packed rows (attnkit::attention's query_offsets form): q [1, Hq, total, D], out and lse
/// [1, Hq, total, .] in double, sequence b's rows from query_offsets[b] on.
template <DecodablePattern P, class Q, AnyKvCache Cache>
void attention(const P& pattern, TensorView<Q> q, std::span<const index_t> query_offsets, const Cache& cache,
               TensorView<double> out, TensorView<double> lse, const Options& options = {}) {
  detail::decode_in_double(pattern, TensorView<const std::remove_const_t<Q>>(q), attnkit::detail::readable_cache(cache),
                           out, &lse, options, query_offsets, true);
}

}  // namespace attnkit::reference
