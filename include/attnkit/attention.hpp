#pragma once
// attnkit::attention: the front door. Checks element types, validates, plans and hands the
// plan to its executor.

#include <type_traits>

#include "attnkit/core/call.hpp"
#include "attnkit/core/concepts.hpp"
#include "attnkit/core/element_rules.hpp"
#include "attnkit/core/options.hpp"
#include "attnkit/core/plan_call.hpp"
#include "attnkit/core/tensor_view.hpp"
#include "attnkit/core/validate.hpp"
#include "attnkit/kernel/execute.hpp"
#include "attnkit/kernel/tiled_driver.hpp"
#include "attnkit/parallel/team.hpp"
#include "attnkit/pattern/full.hpp"

namespace attnkit {

namespace detail {

/// Validates the views and runs the pattern: the AttentionCall of q, k, v (element type E,
/// computed in compute_type_t<E>) and out, with sigma resolved and threads from the dense
/// FLOP count, an O(1) upper bound of the work (the exact cost() of a combination takes
/// O(Hq Lq), and the bound only decides whether tiny calls stay on the calling thread).
template <class E, class Out, AttentionPattern P>
void run_attention(const P& pattern, const TensorView<const E>& q, const TensorView<const E>& k,
                   const TensorView<const E>& v, const TensorView<Out>& out, const TensorView<compute_type_t<E>>* lse,
                   const Options& options) {
  using T = compute_type_t<E>;
  const AttentionShape shape = validate_call<E>(q, k, v, out, lse, options);
  validate_key_lengths(KeyPaddedPattern<P>, options, shape);
  const ScoreModifiers modifiers = validate_score_modifiers(options.softcap, options.alibi_slopes, shape.q_heads);
  const TileShape tiles = TileShape{};
  const AttentionCall<T, E, Out> call{shape,
                                      q,
                                      k,
                                      v,
                                      out,
                                      lse,
                                      static_cast<T>(resolve_scale(options, shape)),
                                      parallel::resolve_threads(options.threads, Full{}.cost(shape).flops),
                                      options.key_lengths,
                                      modifiers};
  // Planning validates the pattern against the call (and throws) before anything is written.
  const auto plan = plan_call(pattern, call, tiles);
  if constexpr (!KeyTilePlan<std::remove_cvref_t<decltype(plan)>>) {
    if (modifiers.active()) {
      reject(options.softcap > 0 ? "options.softcap" : "options.alibi_slopes.size()",
             options.softcap > 0 ? options.softcap : static_cast<double>(options.alibi_slopes.size()),
             "score modifiers apply to the kinds the tiled driver runs (mask kinds and their combinations), not "
             "to Linformer, LSH, kernelized RPE or global projections");
    }
  }
  kernel::execute(call, plan, tiles);
}

/// run_attention for views of any constness, once the element types passed the checks.
template <class P, class Q, class K, class V, class Out, class Lse>
void front_door(const P& pattern, const TensorView<Q>& q, const TensorView<K>& k, const TensorView<V>& v,
                const TensorView<Out>& out, const TensorView<Lse>* lse, const Options& options) {
  if constexpr (check_element_types<P, Q, K, V, Out, Lse>()) {
    using E = std::remove_const_t<Q>;
    run_attention<E, Out>(pattern, TensorView<const E>(q), TensorView<const E>(k), TensorView<const E>(v), out, lse,
                          options);
  }
}

}  // namespace detail

/// out[b, h, i, :] = softmax_j over the pattern's attended keys of (scale * <q_i, k_j>) times V
/// (SPEC.md section 0), for q [B, Hq, Lq, D], k [B, Hk, Lk, D], v [B, Hk, Lk, Dv],
/// out [B, Hq, Lq, Dv], Hq a multiple of Hk (query head h reads kv head h / (Hq / Hk)).
/// Element types (SPEC.md section 12): q, k and v all float, double, bfloat16 or float16; out
/// of the same type, or float for bfloat16 and float16 inputs (half values widen to float as
/// they are read; scores, softmax and accumulation run in float, double for double). Mixing
/// types is a compile-time error. Rows with no attended key get zeros. Throws
/// attnkit::invalid_argument, with nothing written, when a shape, stride or option breaks a
/// rule. `out` must not overlap q, k or v.
template <AttentionPattern P, class Q, class K, class V, class Out>
void attention(const P& pattern, TensorView<Q> q, TensorView<K> k, TensorView<V> v, TensorView<Out> out,
               const Options& options = {}) {
  detail::front_door(pattern, q, k, v, out, static_cast<const TensorView<detail::lse_type_t<Q>>*>(nullptr), options);
}

/// As above, and also lse[b, h, i, 0] = log sum_j mu_ij exp(s_ij) (natural log; -inf for an
/// empty row), lse viewed as [B, Hq, Lq, 1] (see attnkit::lse_view) of the compute type (float,
/// or double for double calls), for the kinds that compute one.
template <AttentionPattern P, class Q, class K, class V, class Out, class Lse>
void attention(const P& pattern, TensorView<Q> q, TensorView<K> k, TensorView<V> v, TensorView<Out> out,
               TensorView<Lse> lse, const Options& options = {}) {
  detail::front_door(pattern, q, k, v, out, &lse, options);
}

/// The same contract for a std::variant of patterns (a Schedule layer): whichever kind it
/// holds (one visit per call, visit_pattern).
template <PatternVariant Layer, class Q, class K, class V, class Out>
void attention(const Layer& layer, TensorView<Q> q, TensorView<K> k, TensorView<V> v, TensorView<Out> out,
               const Options& options = {}) {
  visit_pattern(layer, [&](const auto& held) { attention(held, q, k, v, out, options); });
}

/// As above, with the log-sum-exp.
template <PatternVariant Layer, class Q, class K, class V, class Out, class Lse>
void attention(const Layer& layer, TensorView<Q> q, TensorView<K> k, TensorView<V> v, TensorView<Out> out,
               TensorView<Lse> lse, const Options& options = {}) {
  visit_pattern(layer, [&](const auto& held) { attention(held, q, k, v, out, lse, options); });
}

}  // namespace attnkit
