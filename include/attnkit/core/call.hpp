#pragma once
// AttentionCall: one validated call as plans and executors see it, with its element types.

#include <span>
#include <type_traits>

#include "attnkit/core/half.hpp"
#include "attnkit/core/index.hpp"
#include "attnkit/core/score_modifiers.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/core/tensor_view.hpp"

namespace attnkit {

/// The element types q, k, v and out may have (docs/SPEC.md section 12).
template <class T>
concept ElementType = std::same_as<T, float> || std::same_as<T, double> || HalfType<T>;

/// The type scores, the softmax, accumulators and lse are computed in for elements of type E:
/// float for float and the half types, double for double.
template <ElementType E>
using compute_type_t = std::conditional_t<std::is_same_v<E, double>, double, float>;

/// The views of one call with its options resolved (the front door builds it after
/// validation; executable plans build derived calls, e.g. Linformer's projected K', V').
///   q [B, Hq, Lq, D], k [B, Hk, Lk, D], v [B, Hk, Lk, Dv], out [B, Hq, Lq, Dv],
///   lse [B, Hq, Lq, 1] or nullptr.
/// Element types: T computes (float or double; lse and scale are T), q holds Input, k and v
/// KeyValue (Input, except in derived calls such as Linformer's, whose projected K', V' are
/// T), out Output (Input, or T for a half call writing float). Half inputs widen to T as
/// kernels read them; T outputs narrow to Output as rows are finished.
/// key_lengths: empty, or one valid key count per batch element (keys at or past it are
/// padding, Options::key_lengths); it views the caller's Options, which outlive the call.
/// modifiers: soft-capping and ALiBi (Options::softcap, Options::alibi_slopes), applied by the
/// tiled driver; derived calls leave them off.
/// first_query: the plan's query rows start here in q, out and lse (attention over a cache with
/// many rows: the last rows of the square len x len call): shape.q_len counts every row of the
/// plan, q, out and lse hold rows first_query .. q_len - 1 (row i at index i - first_query), and
/// the tiled driver computes only those (rows before it sharing a tile of a reordering plan
/// get zero queries and are not written). 0 for every other call.
template <class T, class Input = T, class Output = Input, class KeyValue = Input>
struct AttentionCall {
  using value_type = T;
  using input_type = Input;
  using key_value_type = KeyValue;
  using output_type = Output;

  AttentionShape shape;
  TensorView<const Input> q;
  TensorView<const KeyValue> k, v;
  TensorView<Output> out;
  const TensorView<T>* lse;                   // nullptr: no log-sum-exp requested
  T scale;                                    // sigma of SPEC.md section 0
  int threads;                                // resolved thread count
  std::span<const index_t> key_lengths = {};  // empty: no key padding
  ScoreModifiers modifiers = {};              // off unless the caller's Options turn them on
  index_t first_query = 0;                    // rows before it are not computed (see above)
};

namespace detail {
template <class X>
struct CallType {
  using type = AttentionCall<compute_type_t<X>, X>;
};
template <class T, class Input, class Output, class KeyValue>
struct CallType<AttentionCall<T, Input, Output, KeyValue>> {
  using type = AttentionCall<T, Input, Output, KeyValue>;
};
}  // namespace detail

/// The call type a concept or plan is asked about: `X` itself when it is an AttentionCall,
/// else the call whose q, k, v and out all hold element type X, so `PlansFor<P, float>` reads
/// as "plans float calls" and `PlansFor<P, bfloat16>` as "plans bfloat16 calls".
template <class X>
using call_type_t = typename detail::CallType<X>::type;

}  // namespace attnkit
