#pragma once
// attnkit::attention on packed sequences (flash-attn's varlen layout): a batch of sequences of
// different lengths in one call, their rows packed along the sequence axis with no padding,
// each sequence attending only its own keys (SPEC.md section 0, "Packed sequences").

#include <span>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "attnkit/attention.hpp"
#include "attnkit/cache/sequence_pattern.hpp"
#include "attnkit/core/call.hpp"
#include "attnkit/core/concepts.hpp"
#include "attnkit/core/element_rules.hpp"
#include "attnkit/core/errors.hpp"
#include "attnkit/core/options.hpp"
#include "attnkit/core/plan_call.hpp"
#include "attnkit/core/score_modifiers.hpp"
#include "attnkit/core/tensor_view.hpp"
#include "attnkit/core/validate.hpp"
#include "attnkit/kernel/execute.hpp"
#include "attnkit/parallel/team.hpp"
#include "attnkit/pattern/full.hpp"
#include "attnkit/pattern/kinds.hpp"

namespace attnkit {

namespace detail {

/// Validates a packed call (views as the tensor call's with batch 1, the offsets B + 1 entries
/// each from 0 to the packed extent), plans every sequence (throwing before anything is
/// written), then runs them one after the other, each as the tensor call on that sequence
/// alone: the pattern cut to its keys (sequence_prefix), sigma, modifiers and threads resolved
/// as run_attention does for it, so its rows are the same bits.
template <class E, class Out, MaskedPattern P>
void run_packed(const P& pattern, const TensorView<const E>& q, std::span<const index_t> query_offsets,
                const TensorView<const E>& k, const TensorView<const E>& v, std::span<const index_t> key_offsets,
                const TensorView<Out>& out, const TensorView<compute_type_t<E>>* lse, const Options& options) {
  using T = compute_type_t<E>;
  const AttentionShape packed = validate_call<E>(q, k, v, out, lse, options);
  require_size("q", q, kBatch, 1, "must be 1 with query_offsets (every sequence's rows packed along q.sizes[seq])");
  if (query_offsets.empty()) reject("query_offsets.size()", 0, "must be the batch + 1 >= 1 (cu_seqlens_q)");
  const index_t batch = static_cast<index_t>(query_offsets.size()) - 1;
  validate_offsets("query_offsets", query_offsets, batch + 1, "the batch + 1 (cu_seqlens_q)", packed.q_len,
                   "q.sizes[seq]");
  validate_offsets("key_offsets", key_offsets, batch + 1, "query_offsets.size() (cu_seqlens_k)", packed.kv_len,
                   "k.sizes[seq]");
  if (!options.key_lengths.empty()) {
    reject("options.key_lengths.size()", options.key_lengths.size(),
           "must be 0 with packed sequences (key_offsets give each sequence's keys)");
  }
  const ScoreModifiers modifiers = validate_score_modifiers(options.softcap, options.alibi_slopes, packed.q_heads);
  const TileShape tiles{};
  // Sequence b's rows of q, out and lse, and its keys, in the packed views.
  struct SequenceRange {
    index_t first_query, rows, first_key, keys;
  };
  const auto range_of = [&](index_t b) {
    const auto at = static_cast<std::size_t>(b);
    return SequenceRange{query_offsets[at], query_offsets[at + 1] - query_offsets[at], key_offsets[at],
                         key_offsets[at + 1] - key_offsets[at]};
  };
  const auto sequence_call = [&](index_t b, const TensorView<compute_type_t<E>>* sequence_lse) {
    const SequenceRange range = range_of(b);
    const AttentionShape shape{1,          packed.q_heads,  packed.kv_heads, range.rows,
                               range.keys, packed.head_dim, packed.value_dim};
    return AttentionCall<T, E, Out>{shape,
                                    q.rows(0, range.first_query, range.rows),
                                    k.rows(0, range.first_key, range.keys),
                                    v.rows(0, range.first_key, range.keys),
                                    out.rows(0, range.first_query, range.rows),
                                    sequence_lse,
                                    static_cast<T>(resolve_scale(options, shape)),
                                    parallel::resolve_threads(options.threads, Full{}.cost(shape).flops),
                                    {},
                                    modifiers};
  };
  std::vector<TensorView<compute_type_t<E>>> sequence_lse;
  if (lse != nullptr) {
    for (index_t b = 0; b < batch; ++b) sequence_lse.push_back(lse->rows(0, range_of(b).first_query, range_of(b).rows));
  }
  const auto lse_of = [&](index_t b) { return lse != nullptr ? &sequence_lse[static_cast<std::size_t>(b)] : nullptr; };
  // Every sequence's plan before anything is written.
  using Plan = decltype(plan_call(sequence_prefix(pattern, 0), sequence_call(0, nullptr), tiles));
  std::vector<Plan> plans;
  plans.reserve(static_cast<std::size_t>(batch));
  for (index_t b = 0; b < batch; ++b)
    plans.push_back(plan_call(sequence_prefix(pattern, range_of(b).keys), sequence_call(b, lse_of(b)), tiles));
  for (index_t b = 0; b < batch; ++b)
    kernel::execute(sequence_call(b, lse_of(b)), plans[static_cast<std::size_t>(b)], tiles);
}

/// The error for a kind that is not a mask met at run time (held by a Schedule layer, or by
/// attnkit::dispatch's pattern reference).
template <class Held>
[[noreturn]] void reject_unpackable() {
  reject("pattern", Kinds::name_of<Held>(),
         "packed sequences take mask kinds and their combinations (Linformer, Lsh and KernelizedRpe read the whole "
         "sequence: run the tensor call per sequence)");
}

/// run_packed once the pattern and the element types passed the checks; for a Schedule layer,
/// for the kind it holds.
template <class P, class Q, class K, class V, class Out, class Lse>
void packed_front_door(const P& pattern, const TensorView<Q>& q, std::span<const index_t> query_offsets,
                       const TensorView<K>& k, const TensorView<V>& v, std::span<const index_t> key_offsets,
                       const TensorView<Out>& out, const TensorView<Lse>* lse, const Options& options) {
  if constexpr (PatternVariant<P>) {
    std::visit(
        [&](const auto& held) {
          using Held = std::remove_cvref_t<decltype(held)>;
          if constexpr (MaskedPattern<Held>) {
            packed_front_door(held, q, query_offsets, k, v, key_offsets, out, lse, options);
          } else {
            reject_unpackable<Held>();
          }
        },
        pattern);
  } else {
    static_assert(MaskedPattern<P>,
                  "attnkit::attention on packed sequences: the pattern must be a mask kind or combination (Full, "
                  "SlidingWindow, Dilated, Global, BlockSparse, BigBird, Union, Intersection, PerHead)");
    if constexpr (MaskedPattern<P> && check_element_types<P, Q, K, V, Out, Lse>()) {
      using E = std::remove_const_t<Q>;
      run_packed<E, Out>(pattern, TensorView<const E>(q), query_offsets, TensorView<const E>(k), TensorView<const E>(v),
                         key_offsets, out, lse, options);
    }
  }
}

}  // namespace detail

/// Packed sequences (continuous batching's prompts, flash-attn's varlen API): q [1, Hq,
/// total_q, D] holds sequence b's query rows at q.sizes[seq] indices query_offsets[b] ..
/// query_offsets[b + 1] - 1, k [1, Hk, total_k, D] and v [1, Hk, total_k, Dv] its keys and
/// values at key_offsets[b] .. key_offsets[b + 1] - 1 (both offsets B + 1 entries from 0,
/// never decreasing: cu_seqlens_q, cu_seqlens_k); out [1, Hq, total_q, Dv] alike. Sequence b's
/// rows are those of attnkit::attention on its rows and keys alone (causal bottom-right when
/// its counts differ), with the pattern cut to its key count (sequence_prefix: global tokens
/// and block layouts beyond it dropped), the same bits; each sequence is run in turn with the
/// call's threads. Otherwise the tensor call's contract: element types, options (no
/// key_lengths: the offsets give the keys), nothing written when anything, for any sequence,
/// breaks a rule. `pattern` is a mask kind or combination, or a Schedule layer holding one
/// (another held kind is an invalid_argument naming it).
template <class P, class Q, class K, class V, class Out>
requires(AttentionPattern<P> ||
         PatternVariant<P>) void attention(const P& pattern, TensorView<Q> q, std::span<const index_t> query_offsets,
                                           TensorView<K> k, TensorView<V> v, std::span<const index_t> key_offsets,
                                           TensorView<Out> out, const Options& options = {}) {
  detail::packed_front_door(pattern, q, query_offsets, k, v, key_offsets, out,
                            static_cast<const TensorView<detail::lse_type_t<Q>>*>(nullptr), options);
}

/// As above, and lse [1, Hq, total_q, 1] (the tensor call's lse per row).
template <class P, class Q, class K, class V, class Out, class Lse>
requires(AttentionPattern<P> ||
         PatternVariant<P>) void attention(const P& pattern, TensorView<Q> q, std::span<const index_t> query_offsets,
                                           TensorView<K> k, TensorView<V> v, std::span<const index_t> key_offsets,
                                           TensorView<Out> out, TensorView<Lse> lse, const Options& options = {}) {
  detail::packed_front_door(pattern, q, query_offsets, k, v, key_offsets, out, &lse, options);
}

}  // namespace attnkit
