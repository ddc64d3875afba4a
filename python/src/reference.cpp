// attnkit.reference.attention's evaluation: reference::attention in float64 for every pattern
// the module carries (its own translation unit: the dense references compile apart from the
// kernels).

#include "attnkit/reference/attention.hpp"
#include "call_views.hpp"

namespace attnkit::python {

void run_reference(const PatternArg& pattern, const CallViews& call) {
  visit_pattern_arg(pattern, [&](const auto& held) {
    const auto run = [&]<class E>(std::type_identity<E>) {
      const auto q = call.q.view<const E>(), k = call.k.view<const E>(), v = call.v.view<const E>();
      const auto out = call.out.view<double>();
      if (call.lse) {
        reference::attention(held, q, k, v, out, call.lse->view<double>(), call.options);
      } else {
        reference::attention(held, q, k, v, out, call.options);
      }
    };
    with_dtype<double, bfloat16, float16>(
        call.q.dtype, "q", "the reference takes float64, bfloat16 or float16 (widen float32 first)", run);
  });
}

}  // namespace attnkit::python
