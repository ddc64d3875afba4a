// Decode over a KV cache for the module's combinations (Union, Intersection, PerHead; the
// registered kinds decode through attnkit::dispatch in decode.cpp).

#include "attnkit/decode.hpp"
#include "decode_call.hpp"

namespace attnkit::python {

void run_decode_combination(const PatternArg& pattern, const CacheVariant& cache, const DecodeViews& call) {
  const auto run = [&](const auto& combination) {
    std::visit(
        [&](const auto& held_cache) {
          with_decode_types(call, [&]<class Q, class Out>(std::type_identity<Q>, std::type_identity<Out>) {
            const auto q = call.q.view<const Q>();
            const auto out = call.out.view<Out>();
            const TensorView<float> lse = call.lse ? call.lse->view<float>() : TensorView<float>();
            attnkit::detail::decode_front_door(combination, q, attnkit::detail::readable_cache(held_cache), out,
                                               call.lse ? &lse : nullptr, call.options, call.query_offsets,
                                               !call.query_offsets.empty());
          });
        },
        cache);
  };
  std::visit(
      [&](const auto& held) {
        if constexpr (!std::is_same_v<std::decay_t<decltype(held)>, dispatch::PatternRef>) run(*held);
      },
      pattern);
}

}  // namespace attnkit::python
