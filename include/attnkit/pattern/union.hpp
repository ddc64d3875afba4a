#pragma once
// attnkit::Union: the pairs either of two patterns attends (pattern algebra).

#include <algorithm>
#include <vector>

#include "attnkit/core/concepts.hpp"
#include "attnkit/core/cost.hpp"
#include "attnkit/core/detail/score_masking.hpp"
#include "attnkit/core/index.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/detail/thread_scratch.hpp"
#include "attnkit/pattern/detail/key_tile_builder.hpp"
#include "attnkit/pattern/detail/plan_pair.hpp"

namespace attnkit {

/// mu_ij = [first attends (i, j) or second does], each pair counted once (operands are 0/1
/// masks). Longformer (SPEC.md section 4) is
///   attnkit::Union{attnkit::SlidingWindow::symmetric(256), attnkit::Global({0})}
/// and, with per-head dilation, Union{Dilated::symmetric(256, {1, 1, 2, 4}), Global({0})}:
/// only the first operand may reorder rows (Dilated), and the second then plans in its order.
template <MaskedPattern First, MaskedPattern Second>
struct Union {
  First first;
  Second second;

  using Types = detail::OperandTypes<First, Second>;
  using FirstMask = typename Types::FirstMask;
  using SecondMask = typename Types::SecondMask;

  class Mask {
   public:
    Mask(FirstMask first, SecondMask second) : first_(std::move(first)), second_(std::move(second)) {}
    int multiplicity(index_t head, index_t i, index_t j) const {
      return std::max<int>(first_.multiplicity(head, i, j), second_.multiplicity(head, i, j));
    }
    /// |A_i| + |B_i| - |A_i and B_i| inside `keys`; the overlap walks the second's runs.
    index_t count(index_t head, index_t i,
                  const KeyRange& keys) const requires CountingMask<FirstMask> && CountingMask<SecondMask> {
      index_t overlap = 0;
      second_.for_each_span(head, i, [&](const KeyRange& span) {
        const KeyRange inside{std::max(span.begin, keys.begin), std::min(span.end, keys.end)};
        if (inside.begin < inside.end) overlap += first_.count(head, i, inside);
      });
      return first_.count(head, i, keys) + second_.count(head, i, keys) - overlap;
    }
    /// The runs of both operands, merged.
    template <class F>
    void for_each_span(index_t head, index_t i,
                       F&& f) const requires CountingMask<FirstMask> && CountingMask<SecondMask> {
      std::vector<KeyRange> spans;
      const auto collect = [&](const KeyRange& span) { spans.push_back(span); };
      first_.for_each_span(head, i, collect);
      second_.for_each_span(head, i, collect);
      std::sort(spans.begin(), spans.end(), [](const KeyRange& x, const KeyRange& y) { return x.begin < y.begin; });
      KeyRange run{0, 0};
      for (const KeyRange& span : spans) {
        if (run.begin < run.end && span.begin <= run.end) {
          run.end = std::max(run.end, span.end);
          continue;
        }
        if (run.begin < run.end) f(run);
        run = span;
      }
      if (run.begin < run.end) f(run);
    }

   private:
    FirstMask first_;
    SecondMask second_;
  };

  /// Per query tile the two operands' key tiles merged by aligned run (detail::KeyTileBuilder);
  /// a merged tile runs unmasked when unmasked tiles of either operand cover it. Masking runs
  /// both operands' exclude on copies of the row and keeps a score either one keeps, or only
  /// one operand's when the tile lies outside the other's reach (ReachBoundedPlan:
  /// Longformer's band tiles, which hold no global key).
  class Plan : public detail::PlanPair<typename Types::FirstPlan, typename Types::SecondPlan> {
    using Base = detail::PlanPair<typename Types::FirstPlan, typename Types::SecondPlan>;

   public:
    using Base::Base;

    template <class Visit>
    void for_each_key_tile(index_t head, index_t q_begin, index_t q_end, Visit&& visit) const {
      const std::vector<KeyTile>& theirs = detail::collect_key_tiles(this->second_, head, q_begin, q_end);
      detail::KeyTileBuilder tiles(this->key_rows_, visit);
      auto next = theirs.begin();
      this->first_.for_each_key_tile(head, q_begin, q_end, [&](const KeyTile& tile) {
        for (; next != theirs.end() && next->begin <= tile.begin; ++next) tiles.add_piece(*next);
        tiles.add_piece(tile);
      });
      for (; next != theirs.end(); ++next) tiles.add_piece(*next);
      tiles.finish();
    }
    template <class T>
    void exclude(index_t head, index_t position, const KeyTile& tile, T* scores) const {
      if (!detail::may_reach(this->second_, head, position, tile)) {
        this->first_.exclude(head, position, tile, scores);
        return;
      }
      if (!detail::may_reach(this->first_, head, position, tile)) {
        this->second_.exclude(head, position, tile, scores);
        return;
      }
      const index_t keys = tile.end - tile.begin;
      T* second_scores = detail::thread_scratch<Plan, T>(keys);
      std::copy(scores, scores + keys, second_scores);
      this->first_.exclude(head, position, tile, scores);
      this->second_.exclude(head, position, tile, second_scores);
      for (index_t c = 0; c < keys; ++c) {  // a select the compiler vectorises
        scores[c] = scores[c] == detail::kExcludedScore<T> ? second_scores[c] : scores[c];
      }
    }
  };

  /// The global tokens of the one operand holding them (attention with GlobalProjections).
  const std::vector<index_t>& global_tokens() const requires(WithGlobalTokens<First> != WithGlobalTokens<Second>) {
    if constexpr (WithGlobalTokens<Second>) {
      return second.global_tokens();
    } else {
      return first.global_tokens();
    }
  }

  Mask mask(const AttentionShape& shape) const {
    detail::require_unit_multiplicities(first, "Union");
    detail::require_unit_multiplicities(second, "Union");
    return Mask(first.mask(shape), second.mask(shape));
  }
  Plan plan(const AttentionShape& shape, const TileShape& tiles) const {
    return detail::plan_operands<Plan>("Union", first, second, shape, tiles);
  }
  /// Exact pairs from the counting mask: O(Hq Lq) rows, each O(runs of the second operand).
  PatternCost cost(const AttentionShape& shape) const requires CountingMask<Mask> {
    return detail::counted_cost(mask(shape), shape);
  }
};

/// Union{a, b} deduces its operand types (aggregate deduction is C++20, but clang before 17
/// does not implement it; this guide makes the spelling work there too).
template <class First, class Second>
Union(First, Second) -> Union<First, Second>;

}  // namespace attnkit
