#pragma once
// AttentionCall<T>: one validated call as plans and executors see it.

#include <span>

#include "attnkit/core/index.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/core/tensor_view.hpp"

namespace attnkit {

/// The views of one call with its options resolved (the front door builds it after
/// validation; executable plans build derived calls, e.g. Linformer's projected K', V').
///   q [B, Hq, Lq, D], k [B, Hk, Lk, D], v [B, Hk, Lk, Dv], out [B, Hq, Lq, Dv],
///   lse [B, Hq, Lq, 1] or nullptr.
/// key_lengths: empty, or one valid key count per batch element (keys at or past it are
/// padding, Options::key_lengths); it views the caller's Options, which outlive the call.
template <class T>
struct AttentionCall {
  AttentionShape shape;
  TensorView<const T> q, k, v;
  TensorView<T> out;
  const TensorView<T>* lse;                   // nullptr: no log-sum-exp requested
  T scale;                                    // sigma of SPEC.md section 0
  int threads;                                // resolved thread count
  std::span<const index_t> key_lengths = {};  // empty: no key padding
};

}  // namespace attnkit
