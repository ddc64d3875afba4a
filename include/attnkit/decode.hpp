#pragma once
// attnkit::attention over a KV cache (decode, SPEC.md section 13): a few new query rows per
// sequence against the keys and values a contiguous or paged cache holds.

#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "attnkit/cache/cache_rows.hpp"
#include "attnkit/cache/decode_rules.hpp"
#include "attnkit/cache/kv_cache.hpp"
#include "attnkit/core/concepts.hpp"
#include "attnkit/core/errors.hpp"
#include "attnkit/core/half.hpp"
#include "attnkit/core/options.hpp"
#include "attnkit/core/tensor_view.hpp"
#include "attnkit/core/validate.hpp"
#include "attnkit/kernel/cache_call.hpp"
#include "attnkit/kernel/cache_prefill.hpp"
#include "attnkit/kernel/decode_call.hpp"
#include "attnkit/kernel/decode_driver.hpp"
#include "attnkit/parallel/team.hpp"

namespace attnkit {

namespace detail {

/// Validates q [B, Hq, Lq, D], out [B, Hq, Lq, Dv], lse [B, Hq, Lq, 1] and the options against
/// a validated cache shape (of 8-bit blocks or not: the 8-bit query mode needs them); with
/// query_offsets (packed rows), q [1, Hq, total, D] and out, lse alike, the offsets B + 1
/// entries from 0 to total, never decreasing.
template <class Q, class Out, class Lse>
void validate_decode(const TensorView<const Q>& q, const CacheShape& cache, bool eight_bit_cache,
                     const TensorView<Out>& out, const TensorView<Lse>* lse, const Options& options,
                     std::span<const index_t> query_offsets = {}, bool packed = false) {
  validate_view("q", q, 1);
  validate_view("out", out, 1);
  if (packed) {
    require_size("q", q, kBatch, 1, "must be 1 with query_offsets (every sequence's rows packed along q.sizes[seq])");
    validate_offsets("query_offsets", query_offsets, cache.batch + 1, "the cache's batch + 1 (cu_seqlens_q)", q.seq(),
                     "q.sizes[seq]");
  } else {
    require_size("q", q, kBatch, cache.batch, "must equal the cache's batch (lengths.size())");
  }
  if (cache.kv_heads == 0 || q.heads() % cache.kv_heads != 0) {
    reject("q.sizes[heads]", q.heads(),
           "must be a multiple of the cache's kv heads (" + std::to_string(cache.kv_heads) + ")");
  }
  require_size("q", q, kDim, cache.head_dim, "must equal the cache's head dimension");
  require_size("out", out, kBatch, q.batch(), "must equal q.sizes[batch]");
  require_size("out", out, kHeads, q.heads(), "must equal q.sizes[heads]");
  require_size("out", out, kSeq, q.seq(), "must equal q.sizes[seq]");
  require_size("out", out, kDim, cache.value_dim, "must equal the cache's value dimension");
  if (lse != nullptr) validate_lse(*lse, q.batch(), q.heads(), q.seq());
  reject_overlap("out", out, "q", q);
  if (lse != nullptr) {
    reject_overlap("lse", *lse, "q", q);
    reject_overlap("lse", *lse, "out", out);
  }
  if (!options.key_lengths.empty()) {
    reject("options.key_lengths.size()", options.key_lengths.size(),
           "must be 0 over a KV cache (the cache's lengths give each sequence's keys)");
  }
  if (options.quantized_query && !eight_bit_cache) {
    reject("options.quantized_query", "true",
           "needs a cache of q8_0_block (the 8-bit query mode quantizes q to the cache's blocks; SPEC.md section 13)");
  }
  validate_scale_and_threads(options);
}

/// A validated call over a cache with its element types erased (kernel::CacheCall): one
/// instantiation per (q, cache, out) type, whatever the pattern.
template <class Q, AnyKvCache Cache, class Out>
kernel::CacheCallOf<Q, cache_element_t<Cache>, Out> validated_cache_call(
    const TensorView<const Q>& q, const Cache& cache, const TensorView<Out>& out, const TensorView<float>* lse,
    const Options& options, std::span<const index_t> packed_offsets, bool packed) {
  using E = cache_element_t<Cache>;
  const CacheShape shape = validate_cache(cache);
  validate_decode(q, shape, std::is_same_v<E, q8_0_block>, out, lse, options, packed_offsets, packed);
  const double scale = resolve_scale(options, shape.head_dim);
  const ScoreModifiers modifiers = validate_score_modifiers(options.softcap, options.alibi_slopes, q.heads());
  std::vector<index_t> offsets = packed ? std::vector<index_t>(packed_offsets.begin(), packed_offsets.end())
                                        : kernel::uniform_query_offsets(shape.batch, q.seq());
  return kernel::CacheCallOf<Q, E, Out>(q, cache_rows<const E>(cache), out, cache.lengths, std::move(offsets), packed,
                                        shape, lse, static_cast<float>(scale), modifiers, options.quantized_query);
}

/// Runs a validated call for a pattern: lists every row's keys (decode schedule) and builds
/// every plan (prefill schedule) before anything is written, picks the threads from the work
/// and runs the prefill-scheduled sequences, then the others. Compiled once per pattern.
template <DecodablePattern P>
void run_over_cache(const P& pattern, const kernel::CacheCall& call, int requested_threads) {
  if constexpr (requires { pattern.repeats_blocks(); }) {
    if (pattern.repeats_blocks()) {
      reject("pattern", "a BigBird whose given table repeats blocks",
             "attention over a KV cache reads each attended key once (0/1 masks); a repeated block is a "
             "multiplicity (run the tensor call)");
    }
  }
  const kernel::DecodeGeometry& geometry = call.geometry();
  if (geometry.batch == 0 || geometry.q_heads == 0) return;
  const kernel::DecodeSpans spans = kernel::decode_spans(pattern, geometry);  // throws before any write
  double prefill_pairs = 0;
  bool any_decode = false, any_prefill = false;
  for (index_t b = 0; b < geometry.batch; ++b) {
    any_decode = any_decode || geometry.on_decode_schedule(b);
    if (geometry.on_decode_schedule(b)) continue;
    any_prefill = true;  // its rows are written even when it holds no token (zeros, lse -inf)
    prefill_pairs +=
        static_cast<double>(geometry.rows(b)) * static_cast<double>(geometry.lengths[static_cast<std::size_t>(b)]);
  }
  const double per_pair =
      2.0 * static_cast<double>(geometry.head_dim + geometry.value_dim) * static_cast<double>(geometry.q_heads);
  if (any_prefill) {
    kernel::run_cache_prefill(pattern, call, parallel::resolve_threads(requested_threads, prefill_pairs * per_pair));
  }
  if (!any_decode) return;
  double pairs = 0;
  for (const KeyRange& span : spans.spans) pairs += static_cast<double>(span.end - span.begin);
  const double flops = 2.0 * pairs * static_cast<double>(geometry.head_dim + geometry.value_dim);
  call.run_decode_schedule(spans, parallel::resolve_threads(requested_threads, flops));
}

/// The call validated, then run for a pattern or for the kind a variant of patterns holds; a
/// held kind that cannot decode is an invalid_argument naming it, a pattern type that cannot
/// is a compile-time error.
template <class P, class Q, AnyKvCache Cache, class Out, class Lse>
void decode_front_door(const P& pattern, const TensorView<Q>& q, const Cache& cache, const TensorView<Out>& out,
                       const TensorView<Lse>* lse, const Options& options, std::span<const index_t> query_offsets = {},
                       bool packed = false) {
  if constexpr (check_decode_types<Q, Out, Lse>()) {
    using E = std::remove_const_t<Q>;
    if constexpr (PatternVariant<P>) {
      const auto call = validated_cache_call(TensorView<const E>(q), cache, out, lse, options, query_offsets, packed);
      std::visit(
          [&](const auto& held) {
            using Held = std::remove_cvref_t<decltype(held)>;
            if constexpr (DecodablePattern<Held>) {
              run_over_cache(held, call, options.threads);
            } else {
              reject_undecodable<Held>();
            }
          },
          pattern);
    } else if constexpr (check_decodable<P>()) {
      const auto call = validated_cache_call(TensorView<const E>(q), cache, out, lse, options, query_offsets, packed);
      run_over_cache(pattern, call, options.threads);
    }
  }
}

}  // namespace detail

/// out[b, h, i, :] = attention of query row i of sequence b, at position lengths[b] - Lq + i,
/// over the keys the pattern gives that position among the lengths[b] tokens the cache holds
/// (SPEC.md section 13): q [B, Hq, Lq, D] (any Lq; more than kDecodeScheduleRows rows run the
/// prefill schedule) of float, bfloat16 or float16; the
/// cache a KvCache or PagedKvCache of float, bfloat16, float16 or q8_0_block (or of const ones)
/// with Hq a multiple of its kv heads; out [B, Hq, Lq, Dv] of q's type or float. A sequence of length 0, and rows
/// before its first token, get zeros. Every (sequence, kv head) reads each attended key once
/// for all its query heads and rows; results are the same bits for any thread count. Throws
/// attnkit::invalid_argument, with nothing written, when a shape, length, page id or option
/// breaks a rule or the pattern cannot be evaluated on a sequence's length.
template <class P, class Q, AnyKvCache Cache, class Out>
requires(AttentionPattern<P> || PatternVariant<P>) void attention(const P& pattern, TensorView<Q> q, const Cache& cache,
                                                                  TensorView<Out> out, const Options& options = {}) {
  detail::decode_front_door(pattern, q, detail::readable_cache(cache), out,
                            static_cast<const TensorView<float>*>(nullptr), options);
}

/// As above, and lse[b, h, i, 0] = the natural-log log-sum-exp of the row's scores (-inf for
/// a row with no key), lse viewed as [B, Hq, Lq, 1] float.
template <class P, class Q, AnyKvCache Cache, class Out, class Lse>
requires(AttentionPattern<P> || PatternVariant<P>) void attention(const P& pattern, TensorView<Q> q, const Cache& cache,
                                                                  TensorView<Out> out, TensorView<Lse> lse,
                                                                  const Options& options = {}) {
  detail::decode_front_door(pattern, q, detail::readable_cache(cache), out, &lse, options);
}

/// Packed rows, a different count per sequence (continuous batching: a prompt chunk beside
/// one-row decodes in one call; flash-attn's varlen layout): q [1, Hq, total, D] holds
/// sequence b's rows at q.sizes[seq] indices query_offsets[b] .. query_offsets[b + 1] - 1
/// (query_offsets: B + 1 entries from 0 to total, never decreasing: cu_seqlens_q), row i of
/// them at position lengths[b] - count_b + i; out [1, Hq, total, Dv] alike. Each sequence runs
/// the decode or the prefill schedule by its own count; otherwise as above.
template <class P, class Q, AnyKvCache Cache, class Out>
requires(AttentionPattern<P> ||
         PatternVariant<P>) void attention(const P& pattern, TensorView<Q> q, std::span<const index_t> query_offsets,
                                           const Cache& cache, TensorView<Out> out, const Options& options = {}) {
  detail::decode_front_door(pattern, q, detail::readable_cache(cache), out,
                            static_cast<const TensorView<float>*>(nullptr), options, query_offsets, true);
}

/// As above, and lse [1, Hq, total, 1] float.
template <class P, class Q, AnyKvCache Cache, class Out, class Lse>
requires(AttentionPattern<P> || PatternVariant<P>) void attention(const P& pattern, TensorView<Q> q,
                                                                  std::span<const index_t> query_offsets,
                                                                  const Cache& cache, TensorView<Out> out,
                                                                  TensorView<Lse> lse, const Options& options = {}) {
  detail::decode_front_door(pattern, q, detail::readable_cache(cache), out, &lse, options, query_offsets, true);
}

}  // namespace attnkit
