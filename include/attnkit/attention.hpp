#pragma once
// attnkit::attention: the front door. Validates, plans and hands the plan to its executor.

#include <type_traits>

#include "attnkit/core/call.hpp"
#include "attnkit/core/concepts.hpp"
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

/// The AttentionCall of validated views: sigma resolved, and threads from the dense FLOP
/// count, an O(1) upper bound of the work (the exact cost() of a combination takes O(Hq Lq),
/// and the bound only decides whether tiny calls stay on the calling thread).
template <class T>
AttentionCall<T> make_call(const AttentionShape& shape, const TensorView<const T>& q, const TensorView<const T>& k,
                           const TensorView<const T>& v, const TensorView<T>& out, const TensorView<T>* lse,
                           const Options& options) {
  return AttentionCall<T>{shape,
                          q,
                          k,
                          v,
                          out,
                          lse,
                          static_cast<T>(resolve_scale(options, shape)),
                          parallel::resolve_threads(options.threads, Full{}.cost(shape).flops),
                          options.key_lengths};
}

template <class T, AttentionPattern P>
void run_attention(const P& pattern, const TensorView<const T>& q, const TensorView<const T>& k,
                   const TensorView<const T>& v, const TensorView<T>& out, const TensorView<T>* lse,
                   const Options& options) {
  const AttentionShape shape = validate_call<T>(q, k, v, out, lse, options);
  validate_key_lengths(KeyPaddedPattern<P>, options, shape);
  const TileShape tiles = TileShape{};
  const AttentionCall<T> call = make_call<T>(shape, q, k, v, out, lse, options);
  // Planning validates the pattern against the call (and throws) before anything is written.
  kernel::execute(call, plan_call(pattern, call, tiles), tiles);
}

}  // namespace detail

/// out[b, h, i, :] = softmax_j over the pattern's attended keys of (scale * <q_i, k_j>) times V
/// (SPEC.md section 0), for q [B, Hq, Lq, D], k [B, Hk, Lk, D], v [B, Hk, Lk, Dv],
/// out [B, Hq, Lq, Dv], Hq a multiple of Hk (query head h reads kv head h / (Hq / Hk)).
/// Rows with no attended key get zeros. Throws attnkit::invalid_argument, with nothing
/// written, when a shape, stride or option breaks a rule. `out` must not overlap q, k or v.
template <AttentionPattern P, KernelScalar T>
requires PlansFor<P, T>
void attention(const P& pattern, std::type_identity_t<TensorView<const T>> q,
               std::type_identity_t<TensorView<const T>> k, std::type_identity_t<TensorView<const T>> v,
               TensorView<T> out, const Options& options = {}) {
  detail::run_attention<T>(pattern, q, k, v, out, nullptr, options);
}

/// As above, and also lse[b, h, i, 0] = log sum_j mu_ij exp(s_ij) (natural log; -inf for an
/// empty row), lse viewed as [B, Hq, Lq, 1] (see attnkit::lse_view), for the kinds that
/// compute one.
template <AttentionPattern P, KernelScalar T>
requires PlansFor<P, T>
void attention(const P& pattern, std::type_identity_t<TensorView<const T>> q,
               std::type_identity_t<TensorView<const T>> k, std::type_identity_t<TensorView<const T>> v,
               TensorView<T> out, TensorView<T> lse, const Options& options = {}) {
  detail::run_attention<T>(pattern, q, k, v, out, &lse, options);
}

/// The same contract for a std::variant of patterns (a Schedule layer): whichever kind it
/// holds (one visit per call, visit_pattern).
template <PatternVariant V, KernelScalar T>
void attention(const V& layer, std::type_identity_t<TensorView<const T>> q, std::type_identity_t<TensorView<const T>> k,
               std::type_identity_t<TensorView<const T>> v, TensorView<T> out, const Options& options = {}) {
  visit_pattern(layer, [&](const auto& held) { detail::run_attention<T>(held, q, k, v, out, nullptr, options); });
}

/// As above, with the log-sum-exp.
template <PatternVariant V, KernelScalar T>
void attention(const V& layer, std::type_identity_t<TensorView<const T>> q, std::type_identity_t<TensorView<const T>> k,
               std::type_identity_t<TensorView<const T>> v, TensorView<T> out, TensorView<T> lse,
               const Options& options = {}) {
  visit_pattern(layer, [&](const auto& held) { detail::run_attention<T>(held, q, k, v, out, &lse, options); });
}

}  // namespace attnkit
