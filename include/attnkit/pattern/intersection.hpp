#pragma once
// attnkit::Intersection: the pairs both of two patterns attend (pattern algebra).

#include <algorithm>
#include <vector>

#include "attnkit/core/concepts.hpp"
#include "attnkit/core/cost.hpp"
#include "attnkit/core/index.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/pattern/detail/key_tile_builder.hpp"
#include "attnkit/pattern/detail/plan_pair.hpp"

namespace attnkit {

/// mu_ij = [first attends (i, j) and second does] (operands are 0/1 masks), e.g. a causal
/// block-sparse pattern: Intersection{BlockSparse(...), Full{.causal = true}}. Only the first
/// operand may reorder rows, as for Union.
template <MaskedPattern First, MaskedPattern Second>
struct Intersection {
  First first;
  Second second;

  using Types = detail::OperandTypes<First, Second>;
  using FirstMask = typename Types::FirstMask;
  using SecondMask = typename Types::SecondMask;

  class Mask {
   public:
    Mask(FirstMask first, SecondMask second) : first_(std::move(first)), second_(std::move(second)) {}
    int multiplicity(index_t head, index_t i, index_t j) const {
      return std::min<int>(first_.multiplicity(head, i, j), second_.multiplicity(head, i, j));
    }
    /// The first's count over each of the second's runs inside `keys`.
    index_t count(index_t head, index_t i,
                  const KeyRange& keys) const requires CountingMask<FirstMask> && CountingMask<SecondMask> {
      index_t both = 0;
      for_each_clipped_span(head, i, keys, [&](const KeyRange& inside) { both += first_.count(head, i, inside); });
      return both;
    }
    /// The first's runs inside each of the second's runs.
    template <class F>
    void for_each_span(index_t head, index_t i,
                       F&& f) const requires CountingMask<FirstMask> && CountingMask<SecondMask> {
      std::vector<KeyRange> firsts;
      first_.for_each_span(head, i, [&](const KeyRange& span) { firsts.push_back(span); });
      auto next = firsts.begin();
      second_.for_each_span(head, i, [&](const KeyRange& span) {
        while (next != firsts.end() && next->end <= span.begin) ++next;
        for (auto it = next; it != firsts.end() && it->begin < span.end; ++it) {
          f(KeyRange{std::max(it->begin, span.begin), std::min(it->end, span.end)});
        }
      });
    }

   private:
    template <class F>
    void for_each_clipped_span(index_t head, index_t i, const KeyRange& keys, F&& f) const {
      second_.for_each_span(head, i, [&](const KeyRange& span) {
        const KeyRange inside{std::max(span.begin, keys.begin), std::min(span.end, keys.end)};
        if (inside.begin < inside.end) f(inside);
      });
    }
    FirstMask first_;
    SecondMask second_;
  };

  /// Per query tile the overlaps of the two operands' key tiles; an overlap runs unmasked
  /// when both tiles do. Masking applies both operands' exclude in turn.
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
        while (next != theirs.end() && next->end <= tile.begin) ++next;
        for (auto it = next; it != theirs.end() && it->begin < tile.end; ++it) {
          tiles.add_piece(
              KeyTile{std::max(it->begin, tile.begin), std::min(it->end, tile.end), tile.needs_mask || it->needs_mask});
        }
      });
      tiles.finish();
    }
    template <class T>
    void exclude(index_t head, index_t position, const KeyTile& tile, T* scores) const {
      this->first_.exclude(head, position, tile, scores);
      this->second_.exclude(head, position, tile, scores);
    }
  };

  Mask mask(const AttentionShape& shape) const {
    detail::require_unit_multiplicities(first, "Intersection");
    detail::require_unit_multiplicities(second, "Intersection");
    return Mask(first.mask(shape), second.mask(shape));
  }
  Plan plan(const AttentionShape& shape, const TileShape& tiles) const {
    return detail::plan_operands<Plan>("Intersection", first, second, shape, tiles);
  }
  /// Exact pairs from the counting mask: O(Hq Lq) rows, each O(runs of the second operand).
  PatternCost cost(const AttentionShape& shape) const requires CountingMask<Mask> {
    return detail::counted_cost(mask(shape), shape);
  }
};

/// Intersection{a, b} deduces its operand types (aggregate deduction is C++20, but clang before 17
/// does not implement it; this guide makes the spelling work there too).
template <class First, class Second>
Intersection(First, Second) -> Intersection<First, Second>;

}  // namespace attnkit
