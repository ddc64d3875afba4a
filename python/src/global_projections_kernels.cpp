// The kernels of Longformer's separate global projections (attnkit.attention's global_qkv):
// WithGlobalProjections over Global and Longformer's Union(SlidingWindow or Dilated, Global),
// for every element type.

#include <string>
#include <type_traits>
#include <variant>

#include "attnkit/pattern/global_projections.hpp"
#include "call_views.hpp"

namespace attnkit::python {

void run_global_projections(const PatternArg& pattern, const CallViews& call, const GlobalViews& global) {
  with_call_types(call, [&]<class E, class Out>(std::type_identity<E>, std::type_identity<Out>) {
    const GlobalProjections<E> projections{global.q.view<const E>(), global.k.view<const E>(),
                                           global.v.view<const E>()};
    const auto run = [&]<class P>(const P& held) {
      const WithGlobalProjections<P, E> longformer{held, projections};
      const auto q = call.q.view<const E>(), k = call.k.view<const E>(), v = call.v.view<const E>();
      if (call.lse) {
        attnkit::attention(longformer, q, k, v, call.out.view<Out>(), call.lse->view<compute_type_t<E>>(),
                           call.options);
      } else {
        attnkit::attention(longformer, q, k, v, call.out.view<Out>(), call.options);
      }
    };
    const auto refuse = [] {
      detail::reject("global_qkv", "given",
                     "takes Longformer's patterns: attnkit.Global, or attnkit.Union of a SlidingWindow or Dilated with "
                     "attnkit.Global");
    };
    if (const auto* registered = std::get_if<dispatch::PatternRef>(&pattern)) {
      if (const auto* const* tokens = std::get_if<const Global*>(registered)) return run(**tokens);
      return refuse();
    }
    if (const auto* const* unions = std::get_if<const UnionKinds*>(&pattern)) {
      if (const auto* window = std::get_if<Union<SlidingWindow, Global>>(*unions)) return run(*window);
      if (const auto* dilated = std::get_if<Union<Dilated, Global>>(*unions)) return run(*dilated);
    }
    refuse();
  });
}

}  // namespace attnkit::python
