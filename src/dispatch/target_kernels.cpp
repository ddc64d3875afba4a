// attnkit's kinds for one instruction set: compiled once per target by
// cmake/AttnkitDispatch.cmake (-march=x86-64, x86-64-v3 or x86-64-v4), which names the entry
// point through ATTNKIT_DISPATCH_TABLE and then keeps it the object's only global symbol.

#include "attnkit/attention.hpp"
#include "attnkit/decode.hpp"
#include "attnkit/dispatch/kernel_table.hpp"
#include "attnkit/packed.hpp"
#include "attnkit/simd/batch.hpp"

#ifndef ATTNKIT_DISPATCH_TABLE
#error "ATTNKIT_DISPATCH_TABLE must name this target's entry point (attnkit_dispatch_table_<target>)"
#endif

namespace {

template <class E, class Out>
void attention_entry(const attnkit::dispatch::PatternRef& pattern, const attnkit::TensorView<const E>& q,
                     const attnkit::TensorView<const E>& k, const attnkit::TensorView<const E>& v,
                     const attnkit::TensorView<Out>& out, const attnkit::TensorView<attnkit::compute_type_t<E>>* lse,
                     const attnkit::Options& options, const attnkit::dispatch::PackedOffsets* packed) {
  std::visit(
      [&]<class P>(const P* p) {
        if (packed != nullptr) {
          if constexpr (attnkit::MaskedPattern<P>) {
            attnkit::detail::packed_front_door(*p, q, packed->query_offsets, k, v, packed->key_offsets, out, lse,
                                               options);
          } else {
            attnkit::detail::reject_unpackable<P>();
          }
        } else if (lse == nullptr) {
          attnkit::attention(*p, q, k, v, out, options);
        } else {
          attnkit::attention(*p, q, k, v, out, *lse, options);
        }
      },
      pattern);
}

/// attnkit::attention over a KV cache (packed rows when query_offsets is not empty); a kind
/// that cannot decode is refused by name, as a Schedule layer holding it is.
template <class Q, class E, class Out>
void decode_entry(const attnkit::dispatch::PatternRef& pattern, const attnkit::TensorView<const Q>& q,
                  std::span<const attnkit::index_t> query_offsets, const attnkit::dispatch::CacheRef<E>& cache,
                  const attnkit::TensorView<Out>& out, const attnkit::TensorView<float>* lse,
                  const attnkit::Options& options) {
  std::visit(
      [&]<class P, class Cache>(const P* p, const Cache* c) {
        if constexpr (attnkit::DecodablePattern<P>) {
          attnkit::detail::decode_front_door(*p, q, *c, out, lse, options, query_offsets, !query_offsets.empty());
        } else {
          attnkit::detail::reject_undecodable<P>();
        }
      },
      pattern, cache);
}

/// The decode entry points for a cache of E.
template <class E>
constexpr attnkit::dispatch::DecodeEntries<E> decode_entries() {
  using attnkit::bfloat16;
  using attnkit::float16;
  return {&decode_entry<float, E, float>, &decode_entry<bfloat16, E, bfloat16>, &decode_entry<bfloat16, E, float>,
          &decode_entry<float16, E, float16>, &decode_entry<float16, E, float>};
}

}  // namespace

extern "C" const attnkit::dispatch::KernelTable* ATTNKIT_DISPATCH_TABLE() {
  using attnkit::bfloat16;
  using attnkit::float16;
  static const attnkit::dispatch::KernelTable table{
      attnkit::simd::arch_name(),           &attention_entry<float, float>,
      &attention_entry<double, double>,     &attention_entry<bfloat16, bfloat16>,
      &attention_entry<bfloat16, float>,    &attention_entry<float16, float16>,
      &attention_entry<float16, float>,     decode_entries<float>(),
      decode_entries<bfloat16>(),           decode_entries<float16>(),
      decode_entries<attnkit::q8_0_block>()};
  return &table;
}
