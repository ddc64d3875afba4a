#pragma once
// The AttentionPattern concept and the plan/mask concepts it is built from.
// docs/architecture.md shows how each attention kind maps onto them.

#include <concepts>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "attnkit/core/call.hpp"
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
struct KeyRangeVisitorArchetype {
  void operator()(const KeyRange&) const {}
};
}  // namespace detail

/// The types the kernels compute in (half elements compute in float: core/call.hpp).
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

/// An AttentionMask that also counts, for exact costs of combined patterns:
/// count(head, i, keys) sums mu_ij over the keys j in `keys`; for_each_span(head, i, f) calls
/// f(KeyRange) for disjoint runs, in increasing order, holding exactly row i's attended keys.
template <class M>
concept CountingMask = AttentionMask<M> &&
    requires(const M& mask, index_t head, index_t i, const KeyRange& keys, detail::KeyRangeVisitorArchetype f) {
  { mask.count(head, i, keys) } -> std::convertible_to<index_t>;
  mask.for_each_span(head, i, f);
};

/// What the tiled online-softmax driver executes. A plan works in its own row coordinates:
/// query positions [0, Lq) and key positions [0, Lk), which are the rows themselves unless
/// the plan is a ReorderingPlan. For the query positions [q_begin, q_end) of query head
/// `head` (q_begin a multiple of TileShape::query_rows, or the start of a run the plan
/// reported as a RowSplittingPlan), for_each_key_tile calls
/// visit(KeyTile) once per key range to process, in increasing key order, each inside one
/// aligned run of TileShape::key_rows keys; a range with needs_mask == false is attended by
/// every query of the range. For a tile that needs a mask, exclude(head, position, tile,
/// scores) sets scores[c] to -inf for each key tile.begin + c that query `position` does not
/// attend (scores[0 .. tile.end - tile.begin) is that query's row of the score tile) and
/// leaves the others untouched: selection, so an excluded NaN never reaches arithmetic. It
/// must be correct for any tile inside one aligned run, not only the plan's own (combinators
/// call it on their merged tiles).
/// Plans are computed analytically: nothing O(Lq * Lk) is stored or enumerated.
template <class Plan>
concept KeyTilePlan = std::copyable<Plan> &&
    requires(const Plan& plan, index_t head, index_t q_begin, index_t q_end, index_t position, const KeyTile& tile,
             float* scores, detail::KeyTileVisitorArchetype visit) {
  plan.for_each_key_tile(head, q_begin, q_end, visit);
  plan.exclude(head, position, tile, scores);
};

/// A KeyTilePlan that runs on reordered rows (dilated windows gather residue classes):
/// query position p of head h is query row query_row(h, p), key position p is key row
/// key_row(h, p), each a permutation of [0, Lq) and [0, Lk). Query heads with equal
/// key_order(h) (an id) share one key order, so a GQA group packs K/V once per distinct id.
/// Plans that are not ReorderingPlans use the identity.
template <class Plan>
concept ReorderingPlan = KeyTilePlan<Plan> && requires(const Plan& plan, index_t head, index_t position) {
  { plan.query_row(head, position) } -> std::same_as<index_t>;
  { plan.key_row(head, position) } -> std::same_as<index_t>;
  { plan.key_order(head) } -> std::same_as<index_t>;
};

/// A KeyTilePlan whose query tiles may mix rows of very different reach (Longformer's global
/// rows, which attend every key, next to rows attending a band): for_each_row_run(head,
/// q_begin, q_end, f) calls f(KeyRange) for consecutive runs, in order, that partition the
/// tile's positions [q_begin, q_end) into rows of like reach. The driver computes the runs as
/// query tiles of their own when its estimate of the work (padded rows times keys) says that
/// is cheaper, so a band's rows no longer carry a global row's keys.
template <class Plan>
concept RowSplittingPlan = KeyTilePlan<Plan> &&
    requires(const Plan& plan, index_t head, index_t q_begin, index_t q_end, detail::KeyRangeVisitorArchetype f) {
  plan.for_each_row_run(head, q_begin, q_end, f);
};

/// A KeyTilePlan that bounds each query's keys: key_reach(head, position) is a KeyRange
/// holding every key position the query attends (Global: all keys for a global row, else the
/// span of the global keys). Union skips an operand's exclude, and the copy of the row it
/// needs, on tiles outside that operand's reach.
template <class Plan>
concept ReachBoundedPlan = KeyTilePlan<Plan> && requires(const Plan& plan, index_t head, index_t position) {
  { plan.key_reach(head, position) } -> std::same_as<KeyRange>;
};

/// A plan that runs itself on the call (Linformer: project K and V, then the tiled driver on
/// the projections; later LSH's sorted occurrences and FFT-RPE's executor). execute(call)
/// writes out (and lse) for the call it was planned for; it may open the call's one parallel
/// region and run kernel::TiledPass on derived inputs inside it.
/// `X` is an element type or an AttentionCall type (call_type_t), here and below.
template <class Plan, class X>
concept ExecutablePlan = requires(const Plan& plan, const call_type_t<X>& call) {
  plan.execute(call);
};

/// What a pattern's plan may be: a KeyTilePlan for the tiled driver, or an ExecutablePlan.
/// The front door dispatches on this (kernel/execute.hpp), never on the pattern's name.
template <class Plan, class X>
concept ExecutionPlan = KeyTilePlan<Plan> || ExecutablePlan<Plan, X>;

/// Planning from the shapes alone (mask-like patterns: cheap and cacheable) ...
template <class P, class X>
concept PlansFromShape = requires(const P& pattern, const AttentionShape& shape, const TileShape& tiles) {
  { pattern.plan(shape, tiles) } -> ExecutionPlan<X>;
};
/// ... or from the call's data (its views, batch and heads: Linformer's projections, LSH's
/// buckets). A pattern offering both is planned from the call.
template <class P, class X>
concept PlansFromCall = requires(const P& pattern, const call_type_t<X>& call, const TileShape& tiles) {
  { pattern.plan(call, tiles) } -> ExecutionPlan<X>;
};

/// A ReorderingPlan whose positions are occurrences of rows rather than the rows themselves
/// (LSH: the R n sorted occurrences of every row, padded to whole chunks), so results go to
/// the plan, not to output rows:
///  - query_positions() and key_positions() are the extents the driver iterates (Lq and Lk
///    for other plans); query_row / key_row map positions onto rows many-to-one (each must
///    return a valid row, also for padding positions, which the plan then excludes);
///  - sink(b, h, position, row, lse) receives each query position's result, Dv elements of
///    the plan's value_type (valid during the call only), and its natural-log lse, exactly
///    once per pass, from the thread that computed it (LSH folds a round's results into the
///    output by kernel::merge_partial as they come).
template <class Plan>
concept OccurrencePlan = ReorderingPlan<Plan> &&
    requires(const Plan& plan, index_t b, index_t h, index_t position, const typename Plan::value_type* row,
             typename Plan::value_type lse) {
  { plan.query_positions() } -> std::same_as<index_t>;
  { plan.key_positions() } -> std::same_as<index_t>;
  plan.sink(b, h, position, row, lse);
};

/// A KeyTilePlan whose keys are rows of K scaled per position and whose queries are its own
/// keys (LSH's shared query-key vectors, k_j = x_j / ||x_j||, without a normalised copy of K):
///  - the driver packs key position p as key_scale(head, p) * K[key_row(head, p)];
///  - query position p holds the row packed at key position p + query_key_offset(head), so
///    the driver reads a tile's queries back from the packed K^T panel (already in cache for
///    the tile's scores) times query_scale(head, p) (undoing the key scale) instead of
///    gathering them from Q.
template <class Plan>
concept SharedQueryKeyPlan = KeyTilePlan<Plan> && requires(const Plan& plan, index_t head, index_t position) {
  { plan.key_scale(head, position) } -> std::convertible_to<double>;
  { plan.query_key_offset(head) } -> std::same_as<index_t>;
  { plan.query_scale(head, position) } -> std::convertible_to<double>;
};

/// A KeyTilePlan that adds a finite bias to scores (LSH's self penalty; a position bias
/// such as ALiBi): after exclude(), add_bias(head, position, tile, scores, unit) adds
/// unit * bias to scores[c] for key tile.begin + c (unit converts natural-log logits to the
/// driver's base-2 scores), on the tiles its bias_scope() names: those that need a mask (the
/// default; LSH marks the tiles holding a query's own row), or every tile (a plan declaring
/// `static constexpr BiasScope kBiasScope = BiasScope::kEveryTile`). A bias is not an
/// exclusion: combinators, which merge tiles by -inf selection, refuse operands that carry one.
template <class Plan>
concept BiasedPlan = KeyTilePlan<Plan> &&
    requires(const Plan& plan, index_t head, index_t position, const KeyTile& tile, float* scores, float unit) {
  plan.add_bias(head, position, tile, scores, unit);
};

/// A BiasedPlan whose bias may be absent from a call: has_bias() tells (BigBird's plan carries
/// one only for a given table that repeats blocks). The driver skips add_bias when it is false,
/// and combinators take such an operand when it is (its pattern is then a 0/1 mask).
template <class Plan>
concept OptionallyBiasedPlan = BiasedPlan<Plan> && requires(const Plan& plan) {
  { plan.has_bias() } -> std::convertible_to<bool>;
};

/// The key tiles a BiasedPlan's bias applies to (the driver's bias policy).
enum class BiasScope { kMaskedTiles, kEveryTile };
template <BiasedPlan Plan>
constexpr BiasScope bias_scope(const Plan&) {
  if constexpr (requires { Plan::kBiasScope; }) {
    return Plan::kBiasScope;
  } else {
    return BiasScope::kMaskedTiles;
  }
}

/// A pattern that plans calls of element type X, or of call type X (from the shape or from
/// the call).
template <class P, class X>
concept PlansFor = PlansFromShape<P, X> || PlansFromCall<P, X>;

/// A pattern: a small copyable value describing which (query, key) pairs interact.
///  - plan(shape, tiles) or plan(call, tiles): the execution plan for one call and the
///    driver's tile geometry, for calls of every element type (every kind of the library), or
///    for the one element type a pattern holds tensors of (WithGlobalProjections<P, T>); never
///    O(Lq * Lk). Invalid parameters for the call throw attnkit::invalid_argument here, before
///    anything is written.
///  - cost(shape): attended pairs and FLOP (SPEC.md counts, including work beyond the
///    softmax such as projections), for GFLOP/s, complexity fits and algorithm choice.
template <class P>
concept AttentionPattern = std::copyable<P> && requires(const P& pattern, const AttentionShape& shape) {
  { pattern.cost(shape) } -> std::same_as<PatternCost>;
} &&(PlansFor<P, float> || PlansFor<P, double> || PlansFor<P, bfloat16> || PlansFor<P, float16>);

/// kAllAlternatives<V, Pred>: V is a std::variant and Pred<P>::value holds for each of its
/// alternatives P (the front doors' variant concepts are built from it).
template <class V, template <class> class Pred>
inline constexpr bool kAllAlternatives = false;
template <class... Ps, template <class> class Pred>
inline constexpr bool kAllAlternatives<std::variant<Ps...>, Pred> = (Pred<Ps>::value && ...);

template <class P>
struct IsAttentionPattern : std::bool_constant<AttentionPattern<P>> {};

/// A std::variant of patterns (one Schedule layer): attnkit::attention,
/// attnkit::reference::attention and attnkit::dispatch::attention take it as a pattern and run
/// whichever alternative it holds (visit_pattern).
template <class V>
concept PatternVariant = kAllAlternatives<V, IsAttentionPattern>;

/// f(pattern), or for a PatternVariant f(the alternative it holds): the one place a
/// variant of patterns is visited (one std::visit per call, never per tile).
template <class P, class F>
decltype(auto) visit_pattern(const P& pattern, F&& f) {
  if constexpr (PatternVariant<P>) {
    return std::visit(std::forward<F>(f), pattern);
  } else {
    return std::forward<F>(f)(pattern);
  }
}

/// A pattern that honours Options::key_lengths (declares kKeyPadding = true). Every other
/// pattern rejects key lengths rather than silently attending padded keys.
template <class P>
concept KeyPaddedPattern = AttentionPattern<P> && requires {
  requires P::kKeyPadding;
};

/// A pattern whose attended multiset is a closed-form function of the shape: mask(shape)
/// gives its AttentionMask. attnkit::reference::attention accepts exactly these.
template <class P>
concept MaskedPattern = AttentionPattern<P> && requires(const P& pattern, const AttentionShape& shape) {
  { pattern.mask(shape) } -> AttentionMask;
};

/// A pattern holding Longformer's global tokens (Global, or a Union with exactly one operand
/// holding them): attention with GlobalProjections gives those rows their own Qg, Kg, Vg.
template <class P>
concept WithGlobalTokens = requires(const P& pattern) {
  { pattern.global_tokens() } -> std::convertible_to<const std::vector<index_t>&>;
};

}  // namespace attnkit
