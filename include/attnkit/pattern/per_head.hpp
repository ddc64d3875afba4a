#pragma once
// attnkit::PerHead: a pattern chosen per query head (pattern algebra).

#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "attnkit/core/concepts.hpp"
#include "attnkit/core/cost.hpp"
#include "attnkit/core/errors.hpp"
#include "attnkit/core/index.hpp"
#include "attnkit/core/plan_call.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/pattern/detail/plan_pair.hpp"

namespace attnkit {

/// Query head h follows patterns[h], one of the alternatives Ps (e.g. PerHead<Full,
/// SlidingWindow>{{Full{}, SlidingWindow::symmetric(64), ...}}, or one type with different
/// parameters). Each alternative sees the call's shape and the real head index. Alternatives
/// may not reorder rows (a per-head dilation is Dilated's own parameter).
template <MaskedPattern... Ps>
class PerHead {
 public:
  using Choice = std::variant<Ps...>;

  explicit PerHead(std::vector<Choice> patterns) : patterns_(std::move(patterns)) {
    if (patterns_.empty()) detail::reject("PerHead: patterns.size()", 0, "must be >= 1 (one per query head)");
  }

  const std::vector<Choice>& patterns() const { return patterns_; }

  class Mask {
   public:
    using Choice = std::variant<detail::mask_type<Ps>...>;
    explicit Mask(std::vector<Choice> masks) : masks_(std::move(masks)) {}
    int multiplicity(index_t head, index_t i, index_t j) const {
      return std::visit([&](const auto& mask) { return static_cast<int>(mask.multiplicity(head, i, j)); }, of(head));
    }
    index_t count(index_t head, index_t i, const KeyRange& keys) const {
      return std::visit([&](const auto& mask) { return static_cast<index_t>(mask.count(head, i, keys)); }, of(head));
    }
    template <class F>
    void for_each_span(index_t head, index_t i, F&& f) const {
      std::visit([&](const auto& mask) { mask.for_each_span(head, i, f); }, of(head));
    }

   private:
    const Choice& of(index_t head) const { return masks_[static_cast<std::size_t>(head)]; }
    std::vector<Choice> masks_;
  };

  class Plan {
   public:
    using Choice = std::variant<detail::plan_type<Ps>...>;
    static_assert((!ReorderingPlan<detail::plan_type<Ps>> && ...), "PerHead alternatives may not reorder rows");
    explicit Plan(std::vector<Choice> plans) : plans_(std::move(plans)) {}

    template <class Visit>
    void for_each_key_tile(index_t head, index_t q_begin, index_t q_end, Visit&& visit) const {
      std::visit([&](const auto& plan) { plan.for_each_key_tile(head, q_begin, q_end, visit); }, of(head));
    }
    template <class F>
    void for_each_row_run(index_t head, index_t q_begin, index_t q_end, F&& f) const
        requires(RowSplittingPlan<detail::plan_type<Ps>> || ...) {
      std::visit([&](const auto& plan) { attnkit::for_each_row_run(plan, head, q_begin, q_end, f); }, of(head));
    }
    template <class T>
    void exclude(index_t head, index_t position, const KeyTile& tile, T* scores) const {
      std::visit([&](const auto& plan) { plan.exclude(head, position, tile, scores); }, of(head));
    }

   private:
    const Choice& of(index_t head) const { return plans_[static_cast<std::size_t>(head)]; }
    std::vector<Choice> plans_;
  };

  Mask mask(const AttentionShape& shape) const {
    check_shape(shape);
    std::vector<typename Mask::Choice> masks;
    for (const Choice& pattern : patterns_) {
      masks.push_back(std::visit(
          [&](const auto& p) {
            detail::require_unit_multiplicities(p, "PerHead");
            return typename Mask::Choice(p.mask(shape));
          },
          pattern));
    }
    return Mask(std::move(masks));
  }
  Plan plan(const AttentionShape& shape, const TileShape& tiles) const {
    check_shape(shape);
    std::vector<typename Plan::Choice> plans;
    for (const Choice& pattern : patterns_) {
      plans.push_back(std::visit(
          [&](const auto& p) {
            detail::require_unit_multiplicities(p, "PerHead");
            return typename Plan::Choice(p.plan(shape, tiles));
          },
          pattern));
    }
    return Plan(std::move(plans));
  }
  /// Exact pairs from the counting mask: O(Hq Lq) count() calls.
  PatternCost cost(const AttentionShape& shape) const { return detail::counted_cost(mask(shape), shape); }

 private:
  void check_shape(const AttentionShape& shape) const {
    if (static_cast<index_t>(patterns_.size()) != shape.q_heads) {
      detail::reject("PerHead: patterns.size()", patterns_.size(),
                     "must equal q heads = " + std::to_string(shape.q_heads));
    }
  }

  std::vector<Choice> patterns_;
};

}  // namespace attnkit
