#pragma once
// attnkit::attention with Longformer's separate global projections Qg, Kg, Vg passed as an
// argument (SPEC.md section 4): the same call as attention(WithGlobalProjections<P, T>{pattern,
// global}, q, k, v, out) (pattern/global_projections.hpp), through the one front door.

#include <type_traits>

#include "attnkit/attention.hpp"
#include "attnkit/core/concepts.hpp"
#include "attnkit/core/options.hpp"
#include "attnkit/core/tensor_view.hpp"
#include "attnkit/pattern/global_projections.hpp"

namespace attnkit {

/// Longformer attention with separate global projections: rows i in the pattern's global
/// tokens get o_i = softmax_j(sigma <qg_i, kg_j>) vg_j over all keys j; every other row follows
/// the pattern with q, k, v (global keys included, read from k and v). global.q, global.k and
/// global.v have the shapes and element type T of q, k and v (out: T, or float for half T). Costs one extra full pass
/// over the g global rows (2 g Lk (D + Dv) FLOP per head), in the same parallel region; otherwise as
/// attnkit::attention.
template <AttentionPattern P, ElementType T, class Out>
requires WithGlobalTokens<P>
void attention(const P& pattern, std::type_identity_t<TensorView<const T>> q,
               std::type_identity_t<TensorView<const T>> k, std::type_identity_t<TensorView<const T>> v,
               const GlobalProjections<T>& global, TensorView<Out> out, const Options& options = {}) {
  attention(WithGlobalProjections<P, T>{pattern, global}, q, k, v, out, options);
}

/// As above, and also the log-sum-exp of every row (see attnkit::attention).
template <AttentionPattern P, ElementType T, class Out>
requires WithGlobalTokens<P>
void attention(const P& pattern, std::type_identity_t<TensorView<const T>> q,
               std::type_identity_t<TensorView<const T>> k, std::type_identity_t<TensorView<const T>> v,
               const GlobalProjections<T>& global, TensorView<Out> out, TensorView<compute_type_t<T>> lse,
               const Options& options = {}) {
  attention(WithGlobalProjections<P, T>{pattern, global}, q, k, v, out, lse, options);
}

}  // namespace attnkit
