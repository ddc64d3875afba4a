#pragma once
// One attention call's arguments as the kernels take them, and the element-type switch that
// turns the runtime dtypes into the template arguments of attnkit::attention.

#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "attnkit/attention.hpp"
#include "attnkit/core/call.hpp"
#include "attnkit/core/options.hpp"
#include "attnkit/packed.hpp"
#include "patterns.hpp"
#include "tensor_arg.hpp"

namespace attnkit::python {

/// q, k, v, out (and lse) of one call, already checked for rank and dtype by the front
/// (attention.cpp): q, k, v share one dtype; out has it, or float32 for half q; lse is
/// float64 for float64 calls, else float32.
struct CallViews {
  TensorArg q, k, v, out;
  std::optional<TensorArg> lse;
  Options options;
  /// Packed sequences (attnkit/packed.hpp): q, k, v, out [1, H, total, .] with these offsets
  /// (cu_seqlens_q, cu_seqlens_k); false for the tensor call.
  bool packed = false;
  std::vector<index_t> query_offsets, key_offsets;
};

/// with_element_types for the call's q and out (double included).
template <class F>
void with_call_types(const CallViews& call, F&& f) {
  with_element_types<true>(call.q.dtype, call.out.dtype, std::forward<F>(f));
}

/// attnkit::attention(pattern, q, k, v, out[, lse], options) on the call's views, or its packed
/// form (packed.hpp) when call.packed; `pattern` is a pattern or a std::variant of patterns.
template <class P>
void run_attention(const P& pattern, const CallViews& call) {
  with_call_types(call, [&]<class E, class Out>(std::type_identity<E>, std::type_identity<Out>) {
    const auto q = call.q.view<const E>(), k = call.k.view<const E>(), v = call.v.view<const E>();
    const auto out = call.out.view<Out>();
    if (call.packed) {
      if (call.lse) {
        attnkit::attention(pattern, q, call.query_offsets, k, v, call.key_offsets, out,
                           call.lse->view<compute_type_t<E>>(), call.options);
      } else {
        attnkit::attention(pattern, q, call.query_offsets, k, v, call.key_offsets, out, call.options);
      }
    } else if (call.lse) {
      attnkit::attention(pattern, q, k, v, out, call.lse->view<compute_type_t<E>>(), call.options);
    } else {
      attnkit::attention(pattern, q, k, v, out, call.options);
    }
  });
}

/// Longformer's separate global projections Qg, Kg, Vg of a call (shaped and typed as q, k, v).
struct GlobalViews {
  TensorArg q, k, v;
};

/// The kernels of the compiled combinations, one translation unit each (compiled in parallel).
void run_union(const UnionKinds& pattern, const CallViews& call);
/// attnkit::attention(WithGlobalProjections{pattern, global}, ...): `pattern` a Global or a
/// Union of a SlidingWindow or Dilated with a Global (global_projections_kernels.cpp); any
/// other is an invalid_argument.
void run_global_projections(const PatternArg& pattern, const CallViews& call, const GlobalViews& global);
void run_intersection(const IntersectionKinds& pattern, const CallViews& call);
void run_per_head(const PerHeadKind& pattern, const CallViews& call);

/// reference::attention (float64) on the call's views: q, k, v float64 or half, out and lse
/// float64 (reference.cpp).
void run_reference(const PatternArg& pattern, const CallViews& call);

}  // namespace attnkit::python
