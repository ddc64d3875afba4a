#pragma once
// reference::OwnReference<P>: where kinds that are not masks plug in their float64 reference.

#include <concepts>

#include "attnkit/core/concepts.hpp"
#include "attnkit/core/options.hpp"
#include "attnkit/core/tensor_view.hpp"

namespace attnkit::reference {

/// A kind that is not a mask (Linformer, later FFT-RPE) specialises OwnReference<P> next to
/// its reference (reference/<kind>.hpp) with
///   template <class Acc, class T>
///   static void evaluate(const P&, q, k, v, out, const TensorView<T>* lse, const Options&);
/// computing SPEC.md's closed form in Acc (double for reference::attention; the tests also
/// instantiate float as the naive same-precision yardstick), validating first and writing
/// nothing on failure. The primary template has no evaluate.
template <class P>
struct OwnReference {};

template <class P>
concept SelfReferencedPattern = AttentionPattern<P> && requires(const P& pattern, const TensorView<const float>& in,
                                                                const TensorView<float>& out, const Options& options) {
  OwnReference<P>::template evaluate<double, float>(pattern, in, in, in, out, &out, options);
};

}  // namespace attnkit::reference
