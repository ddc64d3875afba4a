#pragma once
// The element-type rules of a call (docs/SPEC.md section 12), checked at compile time by the
// front doors (attnkit::attention, attnkit::dispatch::attention).

#include <type_traits>

#include "attnkit/core/call.hpp"
#include "attnkit/core/concepts.hpp"
#include "attnkit/core/half.hpp"

namespace attnkit::detail {

/// The element-type rules of a call (docs/SPEC.md section 12), as compile-time errors that
/// say which rule: q, k, v one element type; out that type, or float for half inputs; lse the
/// compute type; the pattern able to plan such calls.
template <class P, class Q, class K, class V, class Out, class Lse>
consteval bool check_element_types() {
  using E = std::remove_const_t<Q>;
  static_assert(ElementType<E>,
                "attnkit::attention: q, k and v hold float, double, attnkit::bfloat16 or attnkit::float16");
  static_assert(std::is_same_v<E, std::remove_const_t<K>> && std::is_same_v<E, std::remove_const_t<V>>,
                "attnkit::attention: q, k and v must have one element type (no mixing, e.g. bfloat16 q with float k: "
                "convert one of them)");
  static_assert(!std::is_const_v<Out>, "attnkit::attention: out must view mutable elements");
  static_assert(std::is_same_v<Out, E> || (HalfType<E> && std::is_same_v<Out, float>),
                "attnkit::attention: out has the element type of q, k and v, or float when they are bfloat16 or "
                "float16");
  if constexpr (ElementType<E>) {
    static_assert(std::is_same_v<Lse, compute_type_t<E>>,
                  "attnkit::attention: lse is float for float, bfloat16 and float16 calls, double for double calls");
    static_assert(PlansFor<P, AttentionCall<compute_type_t<E>, E, Out>>,
                  "attnkit::attention: this pattern does not plan calls of these element types "
                  "(WithGlobalProjections<P, T> plans calls whose q, k and v are its own T)");
  }
  return true;
}

/// The lse element type of a call whose q holds Q (compute_type_t, defined for any Q so that
/// a wrong Q reaches check_element_types' message).
template <class Q>
using lse_type_t = std::conditional_t<std::is_same_v<std::remove_const_t<Q>, double>, double, float>;

}  // namespace attnkit::detail
