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
    switch (call.q.dtype) {
      case DType::kFloat64:
        return run(std::type_identity<double>{});
      case DType::kBFloat16:
        return run(std::type_identity<bfloat16>{});
      case DType::kFloat16:
        return run(std::type_identity<float16>{});
      case DType::kFloat32:
      case DType::kInt32:
      case DType::kUInt8:
      case DType::kInt64:
        break;  // refused by the front (attention.cpp)
    }
  });
}

}  // namespace attnkit::python
