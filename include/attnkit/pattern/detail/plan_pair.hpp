#pragma once
// What the pattern combinators (Union, Intersection) share: planning two operands in one row
// order and forwarding that order.

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "attnkit/core/concepts.hpp"
#include "attnkit/core/cost.hpp"
#include "attnkit/core/errors.hpp"
#include "attnkit/core/index.hpp"
#include "attnkit/core/plan_call.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/pattern/detail/row_order.hpp"

namespace attnkit::detail {

template <class P>
using plan_type =
    decltype(std::declval<const P&>().plan(std::declval<const AttentionShape&>(), std::declval<const TileShape&>()));

/// A pattern that can plan in the coordinates of a foreign RowOrder (Global can).
template <class P, class Order>
concept PlannableInOrder = requires(const P& pattern, const AttentionShape& shape, const TileShape& tiles,
                                    const Order& order) {
  { pattern.plan(shape, tiles, order) } -> KeyTilePlan;
};

/// The second operand's plan, in the first plan's row order when the first reorders rows.
/// Only the first operand may reorder: two different row orders cannot share a score tile.
template <class Second, class FirstPlan>
auto plan_second(const Second& second, const AttentionShape& shape, const TileShape& tiles, const FirstPlan& first) {
  if constexpr (ReorderingPlan<FirstPlan>) {
    static_assert(PlannableInOrder<Second, FirstPlan>,
                  "the first operand reorders rows (Dilated): the second must plan in that order (e.g. Global)");
    return second.plan(shape, tiles, first);
  } else {
    static_assert(!ReorderingPlan<plan_type<Second>>,
                  "only the first operand of a combination may reorder rows: put Dilated first");
    return second.plan(shape, tiles);
  }
}

/// Combinators take 0/1 masks: an operand whose multiplicities can exceed 1 (BigBird with a
/// given table that repeats blocks: repeats_blocks()) is refused, naming the combinator, since
/// a union or intersection of multisets is not what its tiles compute.
template <class P>
void require_unit_multiplicities(const P& operand, const char* combinator) {
  if constexpr (requires { operand.repeats_blocks(); }) {
    if (operand.repeats_blocks()) {
      reject(std::string(combinator) + ": operand", "a BigBird whose given table repeats blocks",
             "combinations take 0/1 masks; a repeated block is a multiplicity (call the BigBird on its own)");
    }
  }
}

template <class P>
using mask_type = decltype(std::declval<const P&>().mask(std::declval<const AttentionShape&>()));

/// The mask and plan types of a combinator's two operands (the second planned in the
/// first's row order).
template <class First, class Second>
struct OperandTypes {
  using FirstMask = mask_type<First>;
  using SecondMask = mask_type<Second>;
  using FirstPlan = plan_type<First>;
  using SecondPlan = decltype(plan_second(std::declval<const Second&>(), std::declval<const AttentionShape&>(),
                                          std::declval<const TileShape&>(), std::declval<const FirstPlan&>()));
};

/// Plans both operands, the second in the first's row order, into a combinator's Plan
/// (derived from PlanPair); `combinator` names it when an operand is refused.
template <class Plan, class First, class Second>
Plan plan_operands(const char* combinator, const First& first, const Second& second, const AttentionShape& shape,
                   const TileShape& tiles) {
  require_unit_multiplicities(first, combinator);
  require_unit_multiplicities(second, combinator);
  auto first_plan = first.plan(shape, tiles);
  auto second_plan = plan_second(second, shape, tiles, first_plan);
  return Plan(std::move(first_plan), std::move(second_plan), tiles.key_rows);
}

/// Whether query `position` may attend a key of `tile` as far as the plan tells: false only
/// for a ReachBoundedPlan whose reach misses the tile.
template <KeyTilePlan Plan>
bool may_reach(const Plan& plan, index_t head, index_t position, const KeyTile& tile) {
  if constexpr (ReachBoundedPlan<Plan>) {
    const KeyRange reach = plan.key_reach(head, position);
    return std::max(reach.begin, tile.begin) < std::min(reach.end, tile.end);
  } else {
    return true;
  }
}

/// Two plans in the first one's coordinates; a ReorderingPlan and RowOrder exactly when the
/// first is.
template <class FirstPlan, class SecondPlan>
class PlanPair {
  // Combinators merge tiles by -inf selection; a finite bias, results sent elsewhere or
  // positions that are not rows (LSH) have no meaning inside a union or an intersection.
  // (An OptionallyBiasedPlan is taken: plan_operands refused its pattern if it had a bias.)
  static_assert((!BiasedPlan<FirstPlan> || OptionallyBiasedPlan<FirstPlan>)&&(!BiasedPlan<SecondPlan> ||
                                                                              OptionallyBiasedPlan<SecondPlan>),
                "combinators take no operand with a score bias");
  static_assert(!OccurrencePlan<FirstPlan> && !OccurrencePlan<SecondPlan>,
                "combinators take no operand whose positions are not rows");

 public:
  static constexpr bool kReorders = ReorderingPlan<FirstPlan>;

  PlanPair(FirstPlan first, SecondPlan second, index_t key_rows)
      : first_(std::move(first)), second_(std::move(second)), key_rows_(key_rows) {}

  index_t query_row(index_t head, index_t position) const requires ReorderingPlan<FirstPlan> {
    return first_.query_row(head, position);
  }
  index_t key_row(index_t head, index_t position) const requires ReorderingPlan<FirstPlan> {
    return first_.key_row(head, position);
  }
  index_t key_order(index_t head) const requires ReorderingPlan<FirstPlan> { return first_.key_order(head); }
  /// The runs of both operands, cut wherever either one cuts.
  template <class F>
  void for_each_row_run(index_t head, index_t q_begin, index_t q_end,
                        F&& f) const requires RowSplittingPlan<FirstPlan> || RowSplittingPlan<SecondPlan> {
    std::vector<index_t> ends;
    const auto collect = [&](const KeyRange& run) { ends.push_back(run.end); };
    attnkit::for_each_row_run(first_, head, q_begin, q_end, collect);
    attnkit::for_each_row_run(second_, head, q_begin, q_end, collect);
    std::sort(ends.begin(), ends.end());
    ends.erase(std::unique(ends.begin(), ends.end()), ends.end());
    index_t begin = q_begin;
    for (index_t end : ends) {
      f(KeyRange{begin, end});
      begin = end;
    }
  }
  index_t query_position(index_t head, index_t row) const requires RowOrder<FirstPlan> {
    return first_.query_position(head, row);
  }
  index_t key_position(index_t head, index_t row) const requires RowOrder<FirstPlan> {
    return first_.key_position(head, row);
  }

 protected:
  FirstPlan first_;
  SecondPlan second_;
  index_t key_rows_;
};

/// Cost of a pattern from its counting mask: the attended keys of every row of every head,
/// O(Hq Lq) count() calls. Exact where closed forms are out of reach (combinations).
template <CountingMask M>
PatternCost counted_cost(const M& mask, const AttentionShape& shape) {
  double pairs = 0;
  for (index_t h = 0; h < shape.q_heads; ++h)
    for (index_t i = 0; i < shape.q_len; ++i) pairs += static_cast<double>(mask.count(h, i, KeyRange{0, shape.kv_len}));
  return softmax_cost_over_heads(pairs, shape);
}

}  // namespace attnkit::detail
