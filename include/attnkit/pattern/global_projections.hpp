#pragma once
// attnkit::WithGlobalProjections: a pattern holding Longformer's global tokens together with
// the global rows' own projections Qg, Kg, Vg (SPEC.md section 4), run through
// attnkit::attention like any pattern.

#include <type_traits>

#include "attnkit/core/call.hpp"
#include "attnkit/core/concepts.hpp"
#include "attnkit/core/cost.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/core/validate.hpp"
#include "attnkit/kernel/global_projections_plan.hpp"
#include "attnkit/pattern/full.hpp"

namespace attnkit {

/// The global rows' own query, key and value tensors, shaped like q, k and v.
template <class T>
using GlobalProjections = kernel::GlobalProjections<T>;

/// Longformer attention with separate global projections (SPEC.md section 4): rows i in
/// `pattern`'s global tokens G get o_i = softmax_j(sigma <qg_i, kg_j>) vg_j over all keys j;
/// every other row follows `pattern` with q, k, v (global keys included, read from k and v).
/// global.q, global.k and global.v must have the shapes of the call's q, k and v (checked when
/// the call is planned, before anything is written). It holds T tensors, so it plans calls of
/// T only. Runs as one more full pass over the g global rows in the call's parallel region:
///   attnkit::attention(WithGlobalProjections<Union<Dilated, Global>, float>{longformer, {qg, kg, vg}}, q, k, v, out);
/// (attnkit/global_projections.hpp also takes the projections as an argument). Not a
/// MaskedPattern: its reference is the pattern's reference on q, k, v with the global rows
/// replaced by the full reference on Qg, Kg, Vg.
template <class P, ElementType T>
requires WithGlobalTokens<P> && PlansFromShape<P, T>
struct WithGlobalProjections {
  P pattern;
  GlobalProjections<T> global;

  /// The pattern's plan for every row, then full attention for the g global rows (out of
  /// type T, or float for half tensors).
  template <class Output>
  auto plan(const AttentionCall<compute_type_t<T>, T, Output>& call, const TileShape& tiles) const {
    detail::require_same_sizes("global.q", global.q, "q", call.q);
    detail::require_same_sizes("global.k", global.k, "k", call.k);
    detail::require_same_sizes("global.v", global.v, "v", call.v);
    detail::validate_view("global.q", global.q, 1);
    detail::validate_view("global.k", global.k, 1);
    detail::validate_view("global.v", global.v, 1);
    detail::reject_overlap("out", call.out, "global.q", global.q);
    detail::reject_overlap("out", call.out, "global.k", global.k);
    detail::reject_overlap("out", call.out, "global.v", global.v);
    if (call.lse != nullptr) {
      detail::reject_overlap("lse", *call.lse, "global.q", global.q);
      detail::reject_overlap("lse", *call.lse, "global.k", global.k);
      detail::reject_overlap("lse", *call.lse, "global.v", global.v);
    }
    const auto local_plan = pattern.plan(call.shape, tiles);
    AttentionShape global_shape = call.shape;
    global_shape.q_len = static_cast<index_t>(pattern.global_tokens().size());
    return kernel::GlobalProjectionsPlan<T, std::remove_cvref_t<decltype(local_plan)>, Full::Plan>(
        local_plan, Full{}.plan(global_shape, tiles), global, pattern.global_tokens(), tiles);
  }

  /// The pattern's cost, plus the global rows' full pass as extra work: 2 g Lk (D + Dv) FLOP
  /// per (batch, query head), in flops and extra_flops (attended pairs stay the pattern's).
  PatternCost cost(const AttentionShape& shape) const {
    PatternCost result = pattern.cost(shape);
    const double global_pass = 2.0 * static_cast<double>(shape.batch) * static_cast<double>(shape.q_heads) *
                               static_cast<double>(pattern.global_tokens().size()) * static_cast<double>(shape.kv_len) *
                               static_cast<double>(shape.head_dim + shape.value_dim);
    result.flops += global_pass;
    result.extra_flops += global_pass;
    return result;
  }
};

}  // namespace attnkit
