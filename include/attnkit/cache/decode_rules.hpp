#pragma once
// What a decode call accepts (SPEC.md section 13), shared by attnkit::attention over a KV cache
// (decode.hpp) and attnkit::dispatch's (dispatch.hpp): the patterns that decode, the element
// types, and the errors for the rest.

#include <type_traits>

#include "attnkit/core/concepts.hpp"
#include "attnkit/core/errors.hpp"
#include "attnkit/core/half.hpp"
#include "attnkit/core/index.hpp"
#include "attnkit/pattern/detail/plan_pair.hpp"
#include "attnkit/pattern/kinds.hpp"

namespace attnkit {

/// Calls over a cache with at most this many query rows per sequence run the decode schedule
/// (one pass over each sequence's keys for all its rows, kernel/decode_driver.hpp); more rows
/// (chunked prefill, prefix caching, long drafts) run the prefill schedule of the tiled driver
/// (kernel/cache_prefill.hpp). Both give SPEC.md section 13's result.
inline constexpr index_t kDecodeScheduleRows = 64;

/// A pattern that decodes: a mask kind whose mask lists each row's attended keys as runs
/// (every mask kind and combination; not Linformer, Lsh or KernelizedRpe, whose rows depend
/// on all keys or on hashing the whole sequence).
template <class P>
concept DecodablePattern = MaskedPattern<P> && CountingMask<detail::mask_type<P>>;

namespace detail {

/// The element-type rules of a decode call, as compile-time errors naming the rule.
template <class Q, class Out, class Lse>
consteval bool check_decode_types() {
  using E = std::remove_const_t<Q>;
  static_assert(std::is_same_v<E, float> || HalfType<E>,
                "attnkit::attention over a KV cache: q holds float, attnkit::bfloat16 or attnkit::float16");
  static_assert(!std::is_const_v<Out>, "attnkit::attention over a KV cache: out must view mutable elements");
  static_assert(std::is_same_v<Out, E> || std::is_same_v<Out, float>,
                "attnkit::attention over a KV cache: out has q's element type, or float");
  static_assert(std::is_same_v<Lse, float>, "attnkit::attention over a KV cache: lse is float");
  return true;
}

/// A pattern type that cannot decode, as a compile-time error naming the rule.
template <class P>
consteval bool check_decodable() {
  static_assert(DecodablePattern<P>,
                "attnkit::attention over a KV cache: the pattern must be a mask kind or combination (Full, "
                "SlidingWindow, Dilated, Global, BlockSparse, BigBird, Union, Intersection, PerHead); Linformer, "
                "Lsh and KernelizedRpe cannot decode");
  return DecodablePattern<P>;
}

/// The error for a kind that cannot decode met at run time (held by a Schedule layer, or by
/// attnkit::dispatch's pattern reference).
template <class Held>
[[noreturn]] void reject_undecodable() {
  reject("pattern", Kinds::name_of<Held>(),
         "this kind cannot attend over a KV cache (only mask kinds decode: SPEC.md section 13)");
}

}  // namespace detail

}  // namespace attnkit
