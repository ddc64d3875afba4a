#pragma once
// plan_call and the row-order adapters: how executors and tests read any plan through the
// concepts of core/concepts.hpp.

#include "attnkit/core/call.hpp"
#include "attnkit/core/concepts.hpp"
#include "attnkit/core/index.hpp"
#include "attnkit/core/shape.hpp"

namespace attnkit {

/// The pattern's plan for `call`: plan(call, tiles) when the pattern plans from data, else
/// plan(call.shape, tiles).
template <class Call, AttentionPattern P>
auto plan_call(const P& pattern, const Call& call, const TileShape& tiles) {
  if constexpr (PlansFromCall<P, Call>) {
    return pattern.plan(call, tiles);
  } else {
    return pattern.plan(call.shape, tiles);
  }
}

/// The row order of a plan (SPEC.md section 3's residue classes for dilated windows): query
/// position p of head h reads query row query_row(plan, h, p); the identity for plans that
/// do not reorder.
template <KeyTilePlan Plan>
index_t query_row(const Plan& plan, index_t h, index_t position) {
  if constexpr (ReorderingPlan<Plan>) {
    return plan.query_row(h, position);
  } else {
    return position;
  }
}
template <KeyTilePlan Plan>
index_t key_row(const Plan& plan, index_t h, index_t position) {
  if constexpr (ReorderingPlan<Plan>) {
    return plan.key_row(h, position);
  } else {
    return position;
  }
}
/// Query and key positions a plan iterates: the call's Lq and Lk unless it is an OccurrencePlan.
template <KeyTilePlan Plan>
index_t query_positions(const Plan& plan, const AttentionShape& shape) {
  if constexpr (OccurrencePlan<Plan>) {
    return plan.query_positions();
  } else {
    return shape.q_len;
  }
}
template <KeyTilePlan Plan>
index_t key_positions(const Plan& plan, const AttentionShape& shape) {
  if constexpr (OccurrencePlan<Plan>) {
    return plan.key_positions();
  } else {
    return shape.kv_len;
  }
}
/// Calls f(KeyRange) for the runs of query positions [q_begin, q_end) of head h that a
/// RowSplittingPlan reports, or once for the whole range.
template <KeyTilePlan Plan, class F>
void for_each_row_run(const Plan& plan, index_t h, index_t q_begin, index_t q_end, F&& f) {
  if constexpr (RowSplittingPlan<Plan>) {
    plan.for_each_row_run(h, q_begin, q_end, f);
  } else {
    f(KeyRange{q_begin, q_end});
  }
}
/// Heads with equal ids share packed K/V.
template <KeyTilePlan Plan>
index_t key_order(const Plan& plan, index_t h) {
  if constexpr (ReorderingPlan<Plan>) {
    return plan.key_order(h);
  } else {
    return 0;
  }
}

}  // namespace attnkit
