#pragma once
// The AttentionPattern concept and the plan/mask concepts it is built from.
// docs/architecture.md shows how each attention kind maps onto them.

#include <concepts>

#include "attnkit/core/cost.hpp"
#include "attnkit/core/index.hpp"
#include "attnkit/core/shape.hpp"

namespace attnkit {
namespace detail {
/// Stands for the driver's callback in concept checks: plans must accept any callable
/// taking a KeyTile.
struct KeyTileVisitorArchetype {
  void operator()(const KeyTile&) const {}
};
}  // namespace detail

/// The element types the kernels are compiled for.
template <class T>
concept KernelScalar = std::same_as<T, float> || std::same_as<T, double>;

/// The ground truth of a mask-like pattern bound to one shape: mu_ij of SPEC.md section 0,
/// how often key j enters query i's softmax in query head `head`. Written from the pattern's
/// closed-form definition, independently of any tile enumeration; the float64 reference and
/// the property tests rely on that independence.
template <class M>
concept AttentionMask = std::copyable<M> && requires(const M& mask, index_t head, index_t i, index_t j) {
  { mask.multiplicity(head, i, j) } -> std::convertible_to<int>;
};

/// What the tiled online-softmax driver executes. For the query rows [q_begin, q_end) of query
/// head `head` (q_begin a multiple of TileShape::query_rows), for_each_key_tile calls
/// visit(KeyTile) once per key range to process, in increasing key order, each at most
/// TileShape::key_rows long; a range with needs_mask == false must be attended by every row.
/// allows(head, i, j) is the element predicate the driver applies inside tiles that need a
/// mask. Plans are computed analytically: nothing O(Lq * Lk) is stored or enumerated.
template <class Plan>
concept KeyTilePlan = std::copyable<Plan> &&
    requires(const Plan& plan, index_t head, index_t q_begin, index_t q_end, index_t i, index_t j,
             detail::KeyTileVisitorArchetype visit) {
      plan.for_each_key_tile(head, q_begin, q_end, visit);
      { plan.allows(head, i, j) } -> std::convertible_to<bool>;
    };

/// A KeyTilePlan whose attended keys form one interval per row: row_interval(head, i) returns
/// the KeyRange [begin, end) that row i attends (full, causal, sliding windows). The driver
/// then masks a tile with two contiguous fills instead of one predicate call per element; the
/// interval must agree with allows() (the property tests check it).
template <class Plan>
concept RowIntervalPlan = KeyTilePlan<Plan> && requires(const Plan& plan, index_t head, index_t i) {
  { plan.row_interval(head, i) } -> std::same_as<KeyRange>;
};

/// A pattern: a small copyable value describing which (query, key) pairs interact.
///  - plan(shape, tiles): the execution plan for one call's shapes and the driver's tile
///    geometry; cheap (O(n) or O(blocks)), never O(Lq * Lk).
///  - cost(shape): attended pairs and FLOP (SPEC.md counts), for GFLOP/s, complexity fits and
///    algorithm choice.
template <class P>
concept AttentionPattern = std::copyable<P> &&
    requires(const P& pattern, const AttentionShape& shape, const TileShape& tiles) {
      { pattern.plan(shape, tiles) } -> KeyTilePlan;
      { pattern.cost(shape) } -> std::same_as<PatternCost>;
    };

/// A pattern whose attended multiset is a closed-form function of the shape: mask(shape)
/// gives its AttentionMask. attnkit::reference::attention accepts exactly these.
template <class P>
concept MaskedPattern = AttentionPattern<P> && requires(const P& pattern, const AttentionShape& shape) {
  { pattern.mask(shape) } -> AttentionMask;
};

}  // namespace attnkit
